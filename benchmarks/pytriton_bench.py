"""bind() served by ours (pybackend.pytriton: the user's process is the stub) against
nvidia-pytriton 0.7.0 (tritonserver -> stub with a proxy model.py -> ZeroMQ -> the user's
process), the same callable, the same tritonserver binary, interleaved windows::

    make .venv-pytriton
    .venv/bin/python -m benchmarks.pytriton_bench [--rounds 4] [--window 1.5] [--json out.json]

Per row: req/s, p50/p99 µs, Triton's backend µs/req, and CPU of every process of each
side (tritonserver, and the rest: the user's process plus PyTriton's stub and proxy) as %
of one core. The load generator and windows are the main benchmark's (measure.py).

The GPU row (ours only; skipped, with the reason, without a GPU, torch and cupy): a 64 MiB
FP32 tensor through two callables bound in this process, the client's CUDA shared memory in
and out: ``Tensor(device="cuda")`` returning its input tensor (no host round trip), against
a numpy callable that moves the same data to the GPU and back (the backend stages it
through the host both ways). Measured as benchmarks/gpu_identity.py measures (client
median, backend µs/req from Triton's statistics, copies per request).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import build, payloads, procinfo
from benchmarks.measure import Summary, WindowFailed, run_window
from benchmarks.server import BenchServer, ServerFailed
from benchmarks.workloads import MIB, Workload
from pybackend.server.processes import descendants, free_ports, kill_quietly, wait_gone

REPO = Path(__file__).resolve().parents[1]
PYTHONS = {
    "ours": REPO / ".venv" / "bin" / "python",
    "pytriton": REPO / ".venv-pytriton" / "bin" / "python",
}
SCRIPT = Path(__file__).resolve().parent / "pytriton_server.py"
WORKLOADS = (
    Workload(
        "bind_tiny_c1",
        "bind() identity FP32 [1,16] c1",
        payloads.identity("identity", (1, 16)),
        1,
        ("identity",),
    ),
    Workload(
        "bind_tiny_c8",
        "bind() identity FP32 [1,16] c8",
        payloads.identity("identity", (1, 16)),
        8,
        ("identity",),
    ),
    Workload(
        "bind_4m_c1",
        "bind() identity 4 MiB c1",
        payloads.identity("identity", (1, 4 * MIB // 4)),
        1,
        ("identity",),
        window_scale=2.0,
    ),
)


class BoundServer(BenchServer):
    """A user's script that binds the identity callable; ``pid`` is its tritonserver, and
    every other process of its tree counts as the "stub" side (the user's process,
    PyTriton's stub and proxy processes)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind, REPO, REPO)
        self._triton_pid = 0

    @property
    def pid(self) -> int:
        return self._triton_pid

    def start(self, timeout: float = 180.0) -> float:
        http, grpc, metrics = free_ports(3)
        self.port = http
        ready = Path(self._log.name + ".ready")
        cmd = [
            str(PYTHONS[self.kind]),
            str(SCRIPT),
            "--impl",
            self.kind,
            "--ready-file",
            str(ready),
        ]
        cmd += ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
        t0 = time.perf_counter()
        self.launch(cmd, ready.exists, timeout, 0.05, cwd=tempfile.gettempdir())
        ready.unlink()
        for pid in descendants(self.proc.pid):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "tritonserver":
                self._triton_pid = pid
        if not self._triton_pid:
            raise ServerFailed(f"{self.kind}: no tritonserver process found")
        return time.perf_counter() - t0

    def stubs(self, models: list[str]) -> dict[int, str | None]:
        assert self.proc is not None
        tree = {self.proc.pid, *descendants(self.proc.pid)} - {self._triton_pid}
        return {pid: "identity" for pid in tree}

    def stop(self) -> None:
        if self.proc is None:
            return
        tree = descendants(self.proc.pid)
        # The original backend's regions (PyTriton's side) that a killed stub would leave.
        regions = procinfo.dev_shm_paths([self.proc.pid, *tree])
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # serve() stops everything on Ctrl-C
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in wait_gone(tree, 10.0):
            kill_quietly(pid)
        for path in regions:
            Path(path).unlink(missing_ok=True)
        self._log.close()
        self.proc = None


def _row(w: Workload, kind: str, s: Summary, rss: int) -> dict[str, object]:
    return {
        "workload": w.key,
        "title": w.title,
        "impl": kind,
        "req_s": s.throughput(),
        "p50_us": s.percentile_us(0.5),
        "p99_us": s.percentile_us(0.99),
        "backend_us": s.backend_us(),
        "tritonserver_cpu": s.share(s.server_cpu_s),
        "user_side_cpu": s.share(s.stub_cpu_s),
        "total_cpu": s.share(s.server_cpu_s + s.stub_cpu_s),
        "cpu_us_per_req": (s.server_cpu_s + s.stub_cpu_s) * 1e6 / s.completed
        if s.completed
        else None,
        "errors": s.errors,
        "user_side_rss_mib": rss / MIB,
    }


def _fmt(v: object, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}" if isinstance(v, float) else str(v)


def markdown(rows: list[dict[str, object]]) -> str:
    head = (
        "| workload | impl | req/s | p50 µs | p99 µs | backend µs/req | tritonserver CPU % | "
        "user side CPU % | total CPU % | CPU µs/req | errors |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['title']} | {r['impl']} | {_fmt(r['req_s'])} | {_fmt(r['p50_us'])} | "
        f"{_fmt(r['p99_us'])} | {_fmt(r['backend_us'])} | {_fmt(r['tritonserver_cpu'])} | "
        f"{_fmt(r['user_side_cpu'])} | {_fmt(r['total_cpu'])} | {_fmt(r['cpu_us_per_req'])} | "
        f"{r['errors']} |\n"
        for r in rows
    )
    return head + body


GPU_MIB = 64
GPU_MODELS = {
    "bind_gpu_identity": "Tensor(device='cuda') identity, 64 MiB",
    "bind_numpy_round_trip": "numpy callable, host round trip, 64 MiB",
}


def gpu_rows(requests: int) -> tuple[list[dict[str, object]], str | None]:
    """The GPU rows, or why they are skipped."""
    from benchmarks import gpu_identity

    missing = gpu_identity.gpu_missing()
    if missing is None:
        try:
            import torch

            if not torch.cuda.is_available():
                missing = f"torch {torch.__version__} sees no CUDA device"
        except ImportError:
            missing = "torch is not installed (GPU inputs are torch tensors)"
    if missing is not None:
        return [], missing
    import numpy as np
    import tritonclient.grpc as grpcclient

    from pybackend.pytriton.model_config import ModelConfig, Tensor
    from pybackend.pytriton.triton import Triton, TritonSecurityConfig

    # The TritonConfig on free loopback ports that tests/pytriton serve on.
    sys.path.insert(0, str(REPO / "tests"))
    from integration_support.pytriton_helpers import loopback_config

    def identity(reqs: list) -> list:
        return [{"OUT": r["IN"]} for r in reqs]  # the CUDA tensor itself

    def numpy_round_trip(reqs: list) -> list:
        return [{"OUT": torch.from_numpy(r["IN"]).cuda().cpu().numpy()} for r in reqs]

    def io(device: str) -> dict:
        return {
            "inputs": [Tensor(name="IN", dtype=np.float32, shape=(-1,), device=device)],
            "outputs": [Tensor(name="OUT", dtype=np.float32, shape=(-1,), device=device)],
        }

    config = loopback_config()
    x = np.random.default_rng(0).random(GPU_MIB * MIB // 4, dtype=np.float32)
    rows: list[dict[str, object]] = []
    # Open endpoints: the client registers CUDA shared memory and reads the statistics.
    unrestricted = TritonSecurityConfig(restricted_endpoints=[])
    with Triton(config=config, security_config=unrestricted) as triton:
        unbatched = ModelConfig(batching=False)
        triton.bind("bind_gpu_identity", identity, **io("cuda"), config=unbatched)
        triton.bind("bind_numpy_round_trip", numpy_round_trip, **io("cpu"), config=unbatched)
        server = triton.server
        assert server is not None
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            for model, title in GPU_MODELS.items():
                result = gpu_identity.measure_row(
                    server, client, model, x, _Requests(requests), cuda=True
                )
                rows.append({"workload": model, "title": title, "impl": "ours", **result})
        finally:
            client.close()
    return rows, None


class _Requests:
    """The argument gpu_identity.measure_row reads (its --requests)."""

    def __init__(self, requests: int) -> None:
        self.requests = requests


def gpu_markdown(rows: list[dict[str, object]]) -> str:
    head = "| workload | client median µs | backend µs/req | copies/request |\n|---|---|---|---|\n"
    body = ""
    for r in rows:
        if "error" in r:
            body += f"| {r['title']} | error: {r['error']} | | |\n"
            continue
        moved = r["copies_per_request"]
        assert isinstance(moved, dict)
        body += (
            f"| {r['title']} | {_fmt(r['client_median_us'])} | {_fmt(r['backend_us'])} | "
            + ", ".join(f"{d} {v:g}" for d, v in moved.items())
            + " |\n"
        )
    return head + body


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pytriton_bench")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--window", type=float, default=1.5)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--gpu-requests", type=int, default=30)
    parser.add_argument(
        "--gpu-only",
        action="store_true",
        help="only the GPU row (ours alone: no .venv-pytriton needed; scripts/gpu_check.sh)",
    )
    args = parser.parse_args(argv)
    if args.gpu_only:
        return _gpu_only(args)
    if not PYTHONS["pytriton"].exists():
        print("no .venv-pytriton: run `make .venv-pytriton` first", file=sys.stderr)
        return 2
    loadgen, _ = build.ensure_built()
    kinds = ("ours", "pytriton")
    servers = {k: BoundServer(k) for k in kinds}
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-bind-") as tmp:
        try:
            for k in kinds:
                print(f"{k}: ready in {servers[k].start():.1f} s", file=sys.stderr)
            for w in WORKLOADS:
                request = Path(tmp) / f"{w.key}.http"
                request.write_bytes(w.payload.raw())
                for k in kinds:
                    problem = payloads.send_once(servers[k].port, w.payload)
                    if problem:
                        raise WindowFailed(f"{k} {w.key}: wrong answer: {problem}")
                    run_window(servers[k], w, loadgen, request, args.warmup, 1, ["identity"])
                sums = {k: Summary() for k in kinds}
                for r in range(args.rounds):
                    for k in kinds if r % 2 == 0 else tuple(reversed(kinds)):
                        sums[k].add(
                            run_window(
                                servers[k],
                                w,
                                loadgen,
                                request,
                                args.window * w.window_scale,
                                20,
                                ["identity"],
                            )
                        )
                for k in kinds:
                    rss = sum(procinfo.rss_bytes(p) for p in servers[k].stubs(["identity"]))
                    rows.append(_row(w, k, sums[k], rss))
                print(markdown(rows[-2:]), file=sys.stderr)
        finally:
            for s in servers.values():
                s.stop()
    print(markdown(rows))
    gpu, skipped = gpu_rows(args.gpu_requests)
    if skipped is not None:
        print(f"\nGPU row skipped: {skipped}")
    else:
        print("\n" + gpu_markdown(gpu))
    if args.json:
        args.json.write_text(json.dumps(rows + gpu, indent=2))
    return 0


def _gpu_only(args: argparse.Namespace) -> int:
    gpu, skipped = gpu_rows(args.gpu_requests)
    if skipped is not None:
        print(f"GPU row skipped: {skipped}")
        return 0
    print(gpu_markdown(gpu))
    if args.json:
        args.json.write_text(json.dumps(gpu, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
