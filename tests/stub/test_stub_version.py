"""`python -m pybackend.stub --version` (UV-22): which Python, numpy and protocol an
interpreter would run the stub with; one stub serves numpy 1.x and 2.x environments."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

import pybackend
from pybackend.ipc.protocol import PROTOCOL_VERSION
from pybackend.server.locate import original_venv

PACKAGE_PARENT = str(Path(pybackend.__file__).resolve().parents[1])


def stub_version(python: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    return subprocess.run(
        [python, "-m", "pybackend.stub", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_version_names_python_numpy_and_protocol():
    done = stub_version(sys.executable)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"pybackend {pybackend.__version__} stub, protocol {PROTOCOL_VERSION}: "
        f"CPython {platform.python_version()} ({sys.executable}), numpy {np.__version__}\n"
    )


def test_version_in_a_numpy_1_environment():
    python = str(original_venv() / "bin" / "python3")
    done = stub_version(python)
    assert done.returncode == 0, done.stderr
    assert f"({python}), numpy 1." in done.stdout
