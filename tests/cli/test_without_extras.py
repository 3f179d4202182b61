"""The commands that read config.pbtxt need Triton's protobuf schema, which comes with
tritonclient (`pip install 'pybackend[testing]'`), not with `pip install pybackend` alone.
Without it they must say so and exit 1: they printed a traceback ending in
`ModuleNotFoundError: No module named 'google'` (seen from a wheel installed without extras),
because protobuf was imported before the schema whose error names the fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`
HINT = "pip install 'pybackend[testing]'"


def hidden_packages(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH with modules first that fail to import: they hide the real packages, as an
    environment without tritonclient and protobuf would not have them."""
    hide = tmp_path / "hide"
    hide.mkdir(exist_ok=True)
    for name in ("tritonclient", "google"):
        (hide / f"{name}.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    return {"PYTHONPATH": os.pathsep.join([str(hide), os.getcwd()])}


@pytest.mark.parametrize("command", [["validate"], ["validate", "--run"], ["config"]], ids=" ".join)
def test_a_command_reading_config_pbtxt_names_the_install(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    hidden = hidden_packages(tmp_path)
    made = cli("new", "m", cwd=tmp_path, env_extra=hidden)
    assert made.returncode == 0, made.stderr  # `new` needs nothing beyond numpy
    done = cli(*command, "m", cwd=tmp_path, env_extra=hidden)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert HINT in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
