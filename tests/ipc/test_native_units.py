"""The native unit tests, built with CMake into a temporary directory and run, so they are part
of every test run: csrc/tests/ipc_test.cc (codec, arena, channel, JSON, parallel copy, cgroup
CPU limit) and csrc/tests/ledger_test.cc (MemoryLedger's state transitions: lent blocks pinned
and freed, the stub's blocks returned, device holds and IPC mappings on a fake libcuda.so.1,
teardown) and csrc/tests/bls_cycles_test.cc (which blocking BLS calls the cycle registry
refuses)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.parametrize("target", ["ipc_test", "ledger_test", "bls_cycles_test"])
def test_native_units(tmp_path: Path, target: str) -> None:
    build = tmp_path / "build"
    configure = [
        "cmake", "-S", str(ROOT), "-B", str(build), "-DPYBACKEND_BUILD_TESTS=ON",
        f"-DPYBACKEND_OUTPUT_DIR={tmp_path / 'lib'}", f"-DPython3_EXECUTABLE={sys.executable}",
    ]  # fmt: skip
    subprocess.run(configure, check=True, capture_output=True, text=True)
    subprocess.run(
        ["cmake", "--build", str(build), "--target", target, "-j2"],
        check=True,
        capture_output=True,
        text=True,
    )
    run = subprocess.run([str(build / target)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{target}: all passed" in run.stdout
