"""Runs the `pybackend` command as a user does: a subprocess, its stdout piped (so plain
output, no colour), the exit code and both streams kept for the test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Union

import pytest

Cli = Callable[..., subprocess.CompletedProcess]


def run_pybackend(
    *args: Union[str, Path], cwd: Union[str, Path, None] = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return subprocess.run(
        [sys.executable, "-m", "pybackend.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=env,
    )


@pytest.fixture
def cli() -> Cli:
    return run_pybackend
