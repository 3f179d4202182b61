"""`pybackend backend-dir` prints the directory for tritonserver's --backend-directory."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pybackend.server import our_backend_dir


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pybackend.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_backend_dir_holds_the_built_library() -> None:
    done = _run("backend-dir")
    assert done.returncode == 0, done.stderr
    printed = Path(done.stdout.strip())
    assert printed == our_backend_dir()
    assert (printed / "python" / "libtriton_python.so").is_file()
    interpreter = (printed / "python" / "python_executable").read_text().strip()
    assert Path(interpreter).exists()


def test_backend_dir_original() -> None:
    done = _run("backend-dir", "--original")
    assert done.returncode == 0, done.stderr
    assert (Path(done.stdout.strip()) / "python" / "triton_python_backend_stub").is_file()


def test_console_script_is_installed() -> None:
    try:
        importlib.metadata.distribution("pybackend")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pybackend is not installed (run `pip install -e .`)")
    script = shutil.which("pybackend", path=str(Path(sys.executable).parent))
    assert script, "the `pybackend` console script is missing"
    done = subprocess.run([script, "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("pybackend ")
