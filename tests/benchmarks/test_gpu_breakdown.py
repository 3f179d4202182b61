"""The GPU breakdown's CPU parts (benchmarks/gpu_breakdown.py, gpu_copy_floor.py): the trace
lines aggregated into the tables, the copy floor run end to end on the fake libcuda.so.1
(csrc/tests/fake_cuda.cc), every entry point saying "no GPU" and exiting 0 here, and the CPU
rows alone (--cpu-only) through real servers. The GPU rows' numbers are measured on a GPU
only (scripts/gpu_check.sh, GPU_BREAKDOWN)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "ipc"))

from benchmarks import gpu_breakdown, gpu_copy_floor  # noqa: E402

TRACE = """pbtrace backend exec.encode 30000
pbtrace backend input.share_refused 2000
pbtrace backend lend.alloc 50000
pbtrace backend copy.d2d.enqueue 4000
pbtrace backend copy.d2d.sync 20000
pbtrace stub map.open_lent 100000
pbtrace stub execute.model 40000
pbtrace stub execute.total 200000
pbtrace backend exec.round_trip 260000
pbtrace backend copy.d2d.enqueue 4000
pbtrace backend copy.d2d.sync 22000
pbtrace backend exec.respond 40000
pbtrace stub map.hit 0
not a trace line
pbtrace backend something.new 1000
"""


def test_trace_lines_become_stages_per_request_in_request_order() -> None:
    stages = gpu_breakdown.parse_trace(TRACE)
    assert stages[("backend", "copy.d2d.sync")] == [20000, 22000]
    assert ("stub", "map.hit") in stages and len(stages) == 12
    rows = gpu_breakdown.stage_rows(stages, requests=1)
    order = [(r["side"], r["stage"]) for r in rows]
    assert order[0] == ("backend", "exec.encode")
    assert order.index(("backend", "exec.round_trip")) < order.index(("stub", "execute.total"))
    assert order[-1] == ("backend", "something.new")  # unknown stages last, still shown
    sync = next(r for r in rows if r["stage"] == "copy.d2d.sync")
    assert sync["events_per_request"] == 2 and sync["us_per_request"] == 42.0
    table = gpu_breakdown.stage_table("title", rows, stages, 1)
    assert "| both | protocol | 1.00 | 60.0 |" in table  # round trip - the stub's turn


def _row(backend_us: float) -> dict:
    return {
        "requests": 50,
        "backend_us": backend_us,
        "client_median_us": backend_us + 100,
        "copies_per_request": {"d2d": 2.0, "d2h": 0.0, "h2d": 0.0},
    }


def test_the_summary_compares_with_the_copies_alone_and_the_cpu_tiny_row() -> None:
    results = {
        "0": {
            "plain": {"zero_copy": _row(1000), "zero_copy_4k": _row(150), "cpu_tiny": _row(100)},
            "traced": {"zero_copy": {**_row(1100), "stages": gpu_breakdown.parse_trace(TRACE)}},
        },
        "1:legacy": {"plain": {"zero_copy": {"error": "RuntimeError: boom"}}, "traced": {}},
    }
    floors = {64 << 20: {"two_dtod": 200.0, "two_async_synced": 210.0,
                         "two_async_one_sync": 205.0, "idle_sync": 3.0}}  # fmt: skip
    args = SimpleNamespace(mib=64, requests=50)
    text = gpu_breakdown.report(results, floors, args)
    assert "| 0, proxy | zero_copy | 1000 | 1100 | 1100 | 2, 0, 0 | 200 | 5.00x the copies" in text
    assert "| 0, proxy | zero_copy_4k | 150 |" in text and "1.50x cpu_tiny (goal <= 1.2x)" in text
    assert "| 1, legacy | zero_copy | failed: RuntimeError: boom |" in text
    assert "| 1, legacy | cpu_tiny | failed: not run |" in text
    assert "Stages, pool, DLPack stream = 0, proxy, zero_copy (timers on):" in text
    assert "| 67108864 | 200.0 | 210.0 | 205.0 | 3.0 |" in text


def test_a_setting_names_the_pool_and_the_dlpack_stream() -> None:
    assert gpu_breakdown.switch_env("0") == {"PYBACKEND_GPU_LEND_POOL": "0"}
    assert gpu_breakdown.switch_env("1:legacy") == {
        "PYBACKEND_GPU_LEND_POOL": "1",
        "PYBACKEND_DLPACK_STREAM": "legacy",
    }
    assert gpu_breakdown.switch_label("1") == "1, proxy"
    assert gpu_breakdown.switch_label("1:legacy") == "1, legacy"
    assert gpu_breakdown.switch_backend_config("1:legacy") == []  # the spin stays `auto`


def test_a_setting_may_name_the_spin() -> None:
    """POOL:STREAM:SPIN; an empty STREAM is the proxy stream, as when it is left out."""
    assert gpu_breakdown.switch_env("1::1000") == {"PYBACKEND_GPU_LEND_POOL": "1"}
    assert gpu_breakdown.switch_backend_config("1::1000") == [("ipc-spin-us", "1000")]
    assert gpu_breakdown.switch_label("1::1000") == "1, proxy, spin 1000 µs"
    assert gpu_breakdown.switch_env("0:legacy:0") == {
        "PYBACKEND_GPU_LEND_POOL": "0",
        "PYBACKEND_DLPACK_STREAM": "legacy",
    }
    assert gpu_breakdown.switch_backend_config("0:legacy:0") == [("ipc-spin-us", "0")]
    assert gpu_breakdown.switch_label("0:legacy:0") == "0, legacy, spin 0 µs"


def test_without_a_gpu_every_entry_point_says_so_and_exits_0(tmp_path: Path) -> None:
    from benchmarks import gpu_identity

    if gpu_identity.gpu_missing() is None:
        pytest.skip("a GPU is usable here: the entry points would measure")
    md = tmp_path / "breakdown.md"
    for argv in (
        ["-m", "benchmarks.gpu_identity", "--breakdown", "--markdown", str(md)],
        ["-m", "benchmarks.gpu_identity"],
        ["-m", "benchmarks.gpu_copy_floor", "--library", str(tmp_path / "no-libcuda.so")],
    ):
        done = subprocess.run(
            [sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "no GPU" in done.stdout, done.stdout
    assert "no GPU" in md.read_text() and "nothing measured" in md.read_text()
    # bench-pytriton's GPU row as gpu_check.sh runs it: ours alone, skipped with the reason.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.pytriton_bench", "--gpu-only"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("GPU row skipped: "), done.stdout


@pytest.mark.timeout(300)
def test_bench_pytritons_gpu_row_is_measured_by_its_bound_model_name() -> None:
    """pytriton_bench.gpu_rows measures its bound callables with gpu_identity.measure_row
    under their model names (not rows of gpu_identity.ROWS) on pybackend.pytriton's server:
    here a numpy callable over plain gRPC in place of the CUDA one (cuda=False), the same
    statistics and metrics endpoints of the same server."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    from benchmarks import gpu_identity, pytriton_bench

    sys.path.insert(0, str(REPO / "tests"))
    from integration_support.pytriton_helpers import loopback_config
    from pybackend.pytriton.model_config import ModelConfig, Tensor
    from pybackend.pytriton.triton import Triton, TritonSecurityConfig

    io = {
        "inputs": [Tensor(name="IN", dtype=np.float32, shape=(-1,))],
        "outputs": [Tensor(name="OUT", dtype=np.float32, shape=(-1,))],
    }
    x = np.arange(1024, dtype=np.float32)
    open_endpoints = TritonSecurityConfig(restricted_endpoints=[])
    with Triton(config=loopback_config(), security_config=open_endpoints) as triton:
        triton.bind(
            "bind_cpu_identity",
            lambda reqs: [{"OUT": r["IN"]} for r in reqs],
            **io,
            config=ModelConfig(batching=False),
        )
        client = grpcclient.InferenceServerClient(triton.server.grpc_url)
        try:
            r = gpu_identity.measure_row(
                triton.server, client, "bind_cpu_identity", x, pytriton_bench._Requests(4),
                cuda=False,
            )  # fmt: skip
        finally:
            client.close()
    assert "error" not in r, r
    assert r["requests"] == 4 and r["backend_us"] > 0
    assert r["copies_per_request"] == {"d2d": 0, "d2h": 0, "h2d": 0}


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_the_copy_floor_runs_end_to_end_on_the_fake_driver(tmp_path: Path) -> None:
    from native_build import build_native_target

    build_native_target(tmp_path, "fake_cuda")
    fake = tmp_path / "build" / "fake_cuda" / "libcuda.so.1"
    results = gpu_copy_floor.measure([4096, 1 << 20], reps=3, warmup=1, library=str(fake))
    assert set(results) == {4096, 1 << 20}
    for r in results.values():
        assert set(r) == {"two_dtod", "two_async_synced", "two_async_one_sync", "idle_sync"}
        assert all(v >= 0 for v in r.values())


@pytest.mark.timeout(300)
def test_the_timers_of_both_sides_reach_the_breakdown_through_a_real_server(
    tmp_path: Path,
) -> None:
    """The breakdown's server run on the CPU row (our backend in the real tritonserver): the
    backend's and the stub's lines of the measured requests only, one per stage a request
    meets, and the pool switch in the environment of both."""
    args = SimpleNamespace(mib=64, requests=6, server_log=None)
    trace = tmp_path / "trace.txt"
    results = gpu_breakdown._run_server(args, "1", trace, ("cpu_tiny",))
    r = results["cpu_tiny"]
    assert "error" not in r, r
    assert r["requests"] == 6 and r["copies_per_request"] == {"d2d": 0, "d2h": 0, "h2d": 0}
    per_request = {k: len(v) / 6 for k, v in r["stages"].items()}
    for key in (("backend", "exec.encode"), ("backend", "exec.round_trip"),
                ("backend", "exec.respond"), ("stub", "execute.total"),
                ("stub", "execute.model")):  # fmt: skip
        assert per_request.get(key) == 1, (key, per_request)
    # The warm-up's requests wrote theirs too, outside the window.
    assert len(gpu_breakdown.parse_trace(trace.read_text())[("stub", "execute.model")]) == 12
    # No timers when off: the plain server writes nothing.
    plain = gpu_breakdown._run_server(args, "0", None, ("cpu_tiny",))["cpu_tiny"]
    assert "stages" not in plain and plain["requests"] == 6


def test_a_server_that_cannot_start_fails_its_rows_only(tmp_path: Path, monkeypatch) -> None:
    def broken(*args: object, **kw: object) -> dict:
        raise RuntimeError("tritonserver exited during startup")

    monkeypatch.setattr(gpu_breakdown, "_measure_server", broken)
    args = SimpleNamespace(mib=64, requests=6, server_log=None)
    got = gpu_breakdown._run_server(args, "1", None, ("zero_copy", "cpu_tiny"))
    assert got == {
        row: {"error": "RuntimeError: tritonserver exited during startup"}
        for row in ("zero_copy", "cpu_tiny")
    }


def _emitted_stages() -> set[tuple[str, str]]:
    """(side, stage) of every timer in the code: the backend's trace::Stage/Count/Rename
    literals and its copy stages (csrc/), the stub's gpu_trace.record/count (pybackend/)."""
    import re

    found: set[tuple[str, str]] = set()
    for path in (REPO / "csrc").rglob("*.cc"):
        text = path.read_text()
        calls = re.findall(
            r'(?:trace::Stage \w+|trace::Count|trace::Record|\.Rename)\(\s*"([^"]+)"', text
        )
        found |= {("backend", s) for s in calls}
        for names in re.findall(r"k(?:Enqueue|Sync)\[\] = \{([^}]*)\}", text):
            found |= {("backend", s) for s in re.findall(r'"([^"]+)"', names)}
    for path in (REPO / "pybackend").rglob("*.py"):
        for args in re.findall(r"gpu_trace\.(?:record|count)\(([^\n]*)", path.read_text()):
            found |= {("stub", s) for s in re.findall(r'"([^"]+)"', args.split(",")[0])}
    return found


def test_the_stages_the_breakdown_names_are_the_ones_the_code_emits() -> None:
    """A stage renamed on one side only would vanish from the tables (or show up without its
    meaning): the names in gpu_breakdown.STAGES, the code's timers and docs/gpu.md's list
    agree, side included."""
    listed = {(side, stage) for side, stage, _ in gpu_breakdown.STAGES}
    emitted = _emitted_stages()
    assert emitted == listed, (sorted(emitted - listed), sorted(listed - emitted))
    doc = (REPO / "docs" / "gpu.md").read_text()
    doc = doc.replace("`copy.{d2d,d2h,h2d}.enqueue` and `.sync`", " ".join(
        f"`copy.{d}.{what}`" for d in ("d2d", "d2h", "h2d") for what in ("enqueue", "sync")
    ))  # fmt: skip
    assert not [stage for _, stage in listed if f"`{stage}`" not in doc]


def test_statistics_are_read_once_triton_has_counted_every_answered_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triton counts a request after its response is sent: the endpoint read right after the
    last answer can lag one request (seen on the CPU stand-in: 21 'requests' of 20, and
    copies per request 20/21 of the truth). The reader waits for the count it expects."""
    from benchmarks import gpu_identity

    reads = iter([(5, 500), (5, 500), (6, 620), (7, 700)])
    monkeypatch.setattr(gpu_identity, "backend_ns", lambda server, model: next(reads))
    assert gpu_identity.settled_backend_ns(None, "m", 6) == (6, 620)
    monkeypatch.setattr(gpu_identity, "backend_ns", lambda server, model: (5, 500))
    with pytest.raises(AssertionError, match="count 5 successful requests .* 6 were answered"):
        gpu_identity.settled_backend_ns(None, "m", 6, timeout=0.05)


def test_a_copy_floor_that_fails_costs_the_breakdown_its_floor_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The floor is measured first in the one-shot GPU call: a driver error there is
    reported in the table and the servers' rows are still measured."""
    from benchmarks import gpu_identity

    def broken(sizes: list[int]) -> dict:
        raise RuntimeError("cuMemAlloc_v2 failed with CUDA error 2")

    monkeypatch.setattr(gpu_identity, "gpu_missing", lambda: None)
    monkeypatch.setattr(gpu_copy_floor, "measure", broken)
    monkeypatch.setattr(
        gpu_breakdown, "_run_server", lambda args, switch, trace, rows: {r: _row(100) for r in rows}
    )
    args = SimpleNamespace(mib=64, requests=50, switches="0", markdown=None)
    assert gpu_breakdown.main(args) == 0
    out = capsys.readouterr().out
    assert "Copies alone: RuntimeError: cuMemAlloc_v2 failed with CUDA error 2" in out
    assert "| 0, proxy | zero_copy | 100 | 100 |" in out


def test_the_copy_floor_waits_for_every_copy_it_times() -> None:
    """A device-to-device cuMemcpyDtoD returns before the copy is done (CUDA's API
    synchronization behavior), so each timed variant ends in a stream sync: otherwise the
    issue's yardstick, two 64 MiB copies, would read as two enqueues of a few µs."""

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def __call__(self, name: str, *args: object) -> None:
            self.calls.append(name)

    cu = Recorder()
    gpu_copy_floor._measure_size(cu, "stream", 4096, reps=1, warmup=0)  # type: ignore[arg-type]
    dtod, queue, sync = "cuMemcpyDtoD_v2", "cuMemcpyDtoDAsync_v2", "cuStreamSynchronize"
    assert cu.calls == ["cuMemAlloc_v2"] * 3 + [
        dtod, dtod, sync,  # two_dtod
        queue, sync, queue, sync,  # two_async_synced
        queue, queue, sync,  # two_async_one_sync
        sync,  # idle_sync
    ] + ["cuMemFree_v2"] * 3  # fmt: skip


def _stage_section(out: str, row: str) -> str:
    head = f"Stages, pool, DLPack stream = 1, proxy, {row} (timers on):"
    assert head in out, out
    return out.split(head, 1)[1].split("\n\n", 2)[1]


def test_cpu_only_measures_the_cpu_rows_through_a_real_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--cpu-only needs no GPU: two real servers (plain, timers on) serve the CPU tiny row and
    the BLS row (one call to the tiny model per request), and the report has their backend
    times, the callee's statistics and the stages from both sides' timers: a BLS request meets
    two stubs' turns and one call's four stages."""
    from benchmarks import gpu_identity

    argv = ["--breakdown", "--cpu-only", "--requests", "20", "--switches", "1"]
    assert gpu_identity.main(argv) == 0
    out = capsys.readouterr().out
    for name in ("cpu_tiny", "cpu_bls"):
        row = re.search(rf"^\| 1, proxy \| {name} \| (\d+) \| (\d+) \|", out, re.M)
        assert row and int(row.group(1)) > 0 and int(row.group(2)) > 0, out
    assert re.search(r"callee cpu_tiny: backend \d+ µs, queued \d+ µs", out), out
    assert "zero_copy" not in out and "Copies alone" not in out
    tiny, bls = _stage_section(out, "cpu_tiny"), _stage_section(out, "cpu_bls")
    for stage in ("exec.round_trip", "execute.total", "execute.model", "protocol"):
        assert re.search(rf"\| {re.escape(stage)} \| 1\.00 \| \d", tiny), stage
    for stage in ("exec.round_trip", "execute.total", "execute.model"):
        assert re.search(rf"\| {re.escape(stage)} \| 2\.00 \| \d", bls), stage
    for stage in ("bls.call", "bls.start", "bls.callee", "bls.answer", "bls hand-offs"):
        assert re.search(rf"\| {re.escape(stage)} \| 1\.00 \| \d", bls), stage
    assert "bls." not in tiny
    assert re.search(r"\| cpu_tiny queued \| 1\.00 \| \d", bls), bls
