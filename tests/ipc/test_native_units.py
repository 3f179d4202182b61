"""The native unit tests, built with CMake into a temporary directory and run, so they are part
of every test run: csrc/tests/ipc_test.cc (codec, arena, channel, JSON, parallel copy, cgroup
CPU limit) and csrc/tests/ledger_test.cc (MemoryLedger's state transitions: lent blocks pinned
and freed, the stub's blocks returned, device holds and IPC mappings on a fake libcuda.so.1,
teardown) and csrc/tests/bls_cycles_test.cc (which blocking BLS calls the cycle registry
refuses)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from native_build import build_native_target


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.parametrize("target", ["ipc_test", "ledger_test", "bls_cycles_test"])
def test_native_units(tmp_path: Path, target: str) -> None:
    program = build_native_target(tmp_path, target)
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{target}: all passed" in run.stdout
