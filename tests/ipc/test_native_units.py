"""The native unit tests, built with CMake into a temporary directory and run, so they are part
of every test run: csrc/tests/ipc_test.cc (codec, arena, channel, JSON, parallel copy),
csrc/tests/cgroup_test.cc (the cgroup reader: the CPU limit and the memory headroom, over a
cgroup's ancestors, v2 and v1), csrc/tests/arena_bound_test.cc (the arena waiting at
shm-max-byte-size), csrc/tests/ledger_test.cc (MemoryLedger's state transitions:
lent blocks pinned and freed, the stub's blocks returned, device holds and IPC mappings on a
fake libcuda.so.1, teardown), csrc/tests/bls_cycles_test.cc (which blocking BLS calls the
cycle registry refuses), csrc/tests/backend_config_test.cc (every --backend-config setting
and the texts of the values it refuses) and csrc/tests/cpu_hop_test.cc (the instance thread's
move off its CPU after a batch that failed every request)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from native_build import build_native_target


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
@pytest.mark.parametrize(
    "target",
    [
        "ipc_test",
        "arena_bound_test",
        "cgroup_test",
        "ledger_test",
        "bls_cycles_test",
        "backend_config_test",
        "cpu_hop_test",
    ],
)
def test_native_units(tmp_path: Path, target: str) -> None:
    program = build_native_target(tmp_path, target)
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{target}: all passed" in run.stdout
    if target == "ledger_test":
        # The GPU trace (csrc/cuda/trace.h): off, nothing is written; with
        # PYBACKEND_GPU_TRACE=<file> every timed stage of the lending-pool test is a line.
        assert_gpu_trace(program, tmp_path)


def assert_gpu_trace(program: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    env = {k: v for k, v in os.environ.items() if k != "PYBACKEND_GPU_TRACE"}
    subprocess.run([str(program)], capture_output=True, text=True, timeout=120, env=env)
    assert not trace.exists()
    env["PYBACKEND_GPU_TRACE"] = str(trace)
    run = subprocess.run([str(program)], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    stages: dict = {}
    for line in trace.read_text().splitlines():
        tag, side, stage, ns = line.split(" ")
        assert (tag, side) == ("pbtrace", "backend") and int(ns) >= 0
        stages[stage] = stages.get(stage, 0) + 1
    expected = ["input.share_refused", "lend.alloc", "lend.handle", "lend.free"]
    expected += ["copy.d2d.enqueue", "copy.d2d.sync", "ipc_cache.open", "ipc_cache.hit"]
    for stage in expected:
        assert stages.get(stage, 0) >= 1, (stage, stages)
    assert stages["lend.pool_hit"] >= 2, stages  # the second and third lent inputs
    assert stages["input.share_refused_known"] >= 2, stages  # the client's pointer again
