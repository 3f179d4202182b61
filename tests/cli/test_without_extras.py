"""The commands that read config.pbtxt need Triton's protobuf schema, which comes with
tritonclient (`pip install 'pybackend[testing]'`), not with `pip install pybackend` alone.
Without it they must say so and exit 1: they printed a traceback ending in
`ModuleNotFoundError: No module named 'google'` (seen from a wheel installed without extras),
because protobuf was imported before the schema whose error names the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HINT = "pip install 'pybackend[testing]'"


def run_without_tritonclient(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # Modules first on the path that fail to import hide the real packages, as an
    # environment without tritonclient and protobuf would not have them.
    hide = tmp_path / "hide"
    hide.mkdir(exist_ok=True)
    for name in ("tritonclient", "google"):
        (hide / f"{name}.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hide), os.getcwd()]))
    return subprocess.run(
        [sys.executable, "-m", "pybackend.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env=env,
    )


@pytest.mark.parametrize("command", [["validate"], ["validate", "--run"], ["config"]], ids=" ".join)
def test_a_command_reading_config_pbtxt_names_the_install(
    tmp_path: Path, command: list[str]
) -> None:
    made = run_without_tritonclient(tmp_path, "new", "m")
    assert made.returncode == 0, made.stderr  # `new` needs nothing beyond numpy
    done = run_without_tritonclient(tmp_path, *command, "m")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert HINT in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
