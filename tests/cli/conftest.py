"""Runs the `pybackend` command as a user does: a subprocess, its stdout piped (so plain
output, no colour), the exit code and both streams kept for the test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Mapping, Optional, Union

import pytest

Cli = Callable[..., subprocess.CompletedProcess]


def run_pybackend(
    *args: Union[str, Path],
    cwd: Union[str, Path, None] = None,
    timeout: float = 120,
    env_extra: Optional[Mapping[str, str]] = None,
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "pybackend.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=env,
    )


def run_on_terminal(*args: Union[str, Path], timeout: float = 120) -> str:
    """What the command prints when its stdout is a terminal (a pseudo-terminal here)."""
    main, child = os.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm", COLUMNS="200")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pybackend.cli", *map(str, args)],
            stdout=child,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
            env=env,
        )
        os.close(child)
        child = -1
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the writing side is closed and everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if child >= 0:
            os.close(child)
        os.close(main)
    assert done.returncode in (0, 1), done.stderr
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.fixture(scope="session")  # a plain function: module-scoped fixtures may use it too
def cli() -> Cli:
    return run_pybackend


@pytest.fixture
def cli_on_terminal() -> Callable[..., str]:
    return run_on_terminal
