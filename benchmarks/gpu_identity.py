"""GPU benchmark: a 64 MiB GPU tensor through a python model, zero copy against the host
round trip, on the real tritonserver with our backend (run by scripts/gpu_check.sh).

    python -m benchmarks.gpu_identity [--requests 50] [--mib 64] [--markdown PATH]
    python -m benchmarks.gpu_identity --breakdown [--markdown PATH]   (benchmarks/gpu_breakdown.py)

The client keeps the tensor on the GPU both ways (CUDA shared memory in and out, cupy), so
only what the backend and the model do differs between the rows:

  zero_copy        FORCE_CPU_ONLY_INPUT_TENSORS "no"; returns Tensor.from_dlpack of its GPU
                   input (a view): what pybackend's GPU tensors are for
  model_round_trip the same input; the model does .cpu().numpy() and back to the GPU before
                   Tensor.from_dlpack: what a model does where GPU tensors cannot pass
  forced_cpu       FORCE_CPU_ONLY_INPUT_TENSORS "yes": the backend copies the input to the
                   host and the model's numpy output back to the GPU
  zero_copy_4k     zero_copy's model with a 4 KiB tensor: the GPU path's fixed cost
  cpu_tiny         a KIND_CPU identity of FP32 [16] over plain gRPC (no shared memory): the
                   CPU tiny row the 4 KiB GPU row is compared with (issue 31: at most 1.2x)
  cpu_bls          a KIND_CPU model that makes one BLS call to cpu_tiny per request and
                   returns its output: issue 31's BLS c1 row (its callee's statistics too)

Backend time is Triton's compute_input + compute_infer + compute_output per request (the
statistics endpoint), over --requests requests after a warm-up; client time is the median
round trip; copies per request are read from pybackend_gpu_copies_total. Needs a GPU, torch
and cupy; without one it says so and exits 0 (nothing to measure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from benchmarks.server import BenchServer

REPO = Path(__file__).resolve().parents[1]
# The CUDA shared-memory client, the counters and the model template live with the GPU tests.
sys.path.insert(0, str(REPO / "tests" / "gpu"))

import gpu_client  # noqa: E402
from gpu_io_models import FP32, model_config, torch_model, write_io_models  # noqa: E402


def _model(make_out: str, kind: str = "KIND_GPU") -> str:
    body = f"""
tensor = pb_utils.get_input_tensor_by_name(request, "IN")
responses.append(pb_utils.InferenceResponse([{make_out}]))
"""
    if kind == "KIND_GPU":
        return torch_model(body)
    # A CPU model imports no torch (as the CPU benchmark's identity; and it runs without it).
    return _CPU_MODEL.format(body=textwrap.indent(body.strip("\n"), " " * 12))


_CPU_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
{body}
        return responses
"""


#: model -> (FORCE_CPU_ONLY_INPUT_TENSORS, how the model makes OUT from ``tensor``, kind)
MODELS = {
    "zero_copy": (
        "no",
        'pb_utils.Tensor.from_dlpack("OUT", torch.from_dlpack(tensor))',
        "KIND_GPU",
    ),
    "model_round_trip": (
        "no",
        'pb_utils.Tensor.from_dlpack("OUT", torch.from_numpy('
        "torch.from_dlpack(tensor).cpu().numpy()).to(self.device))",
        "KIND_GPU",
    ),
    "forced_cpu": ("yes", 'pb_utils.Tensor("OUT", tensor.as_numpy())', "KIND_GPU"),
    "cpu_tiny": ("yes", 'pb_utils.Tensor("OUT", tensor.as_numpy())', "KIND_CPU"),
    # A blocking call from execute's own thread (the BLS path on sync), as benchmarks.run's bls.
    "cpu_bls": (
        "yes",
        'pb_utils.Tensor("OUT", pb_utils.get_output_tensor_by_name(pb_utils.InferenceRequest('
        'model_name="cpu_tiny", requested_output_names=["OUT"], inputs=[tensor]).exec(), '
        '"OUT").as_numpy())',
        "KIND_CPU",
    ),
}

#: model -> the models it calls (written beside it; their statistics are read with its own)
CALLEES = {"cpu_bls": ("cpu_tiny",)}

#: row -> (model, tensor bytes: 0 is --mib MiB; CUDA shared memory both ways unless KIND_CPU)
ROWS = {
    "zero_copy": ("zero_copy", 0),
    "model_round_trip": ("model_round_trip", 0),
    "forced_cpu": ("forced_cpu", 0),
    "zero_copy_4k": ("zero_copy", 4096),
    "cpu_tiny": ("cpu_tiny", 64),
    "cpu_bls": ("cpu_bls", 64),
}


def write_repository(root: Path, models: Any = None) -> Path:
    names = list(models or MODELS)
    names += [c for name in names for c in CALLEES.get(name, ()) if c not in names]
    for name in names:
        force_cpu, make_out, kind = MODELS[name]
        config = model_config(
            name,
            [FP32.format("IN")],
            [FP32.format("OUT")],
            kind=kind,
            FORCE_CPU_ONLY_INPUT_TENSORS=force_cpu,
        )
        write_io_models(root, {name: (config, _model(make_out, kind))})
    return root


def row_input(row: str, mib: int) -> np.ndarray:
    """The tensor a row sends (FP32, distinct values so a wrong copy shows)."""
    nbytes = ROWS[row][1] or mib * (1 << 20)
    return np.arange(nbytes // 4, dtype=np.float32)


def on_gpu(row: str) -> bool:
    return MODELS[ROWS[row][0]][2] == "KIND_GPU"


def gpu_missing() -> str | None:
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as e:  # ImportError, or cupy's CUDARuntimeError without a driver
        return f"cupy cannot use a GPU here ({type(e).__name__}: {e})"
    return None


def inference_stats(server: Any, model: str) -> dict:
    """Triton's inference_stats of ``model`` (the statistics endpoint)."""
    url = f"http://{server.http_url}/v2/models/{model}/stats"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())["model_stats"][0]["inference_stats"]


def backend_ns(server: Any, model: str) -> tuple[int, int]:
    """(successful requests, compute_input + compute_infer + compute_output ns) so far."""
    stats = inference_stats(server, model)
    return stats["success"]["count"], BenchServer.backend_ns_of(stats)


def callee_split(before: dict, after: dict, requests: int) -> dict:
    """A callee's µs per call between two inference_stats: its backend time and the time its
    requests waited in Triton's queue (the hand-off from the caller to the callee's thread)."""

    backend_ns = BenchServer.backend_ns_of(after) - BenchServer.backend_ns_of(before)
    queue_ns = after["queue"]["ns"] - before["queue"]["ns"]
    return {"backend_us": backend_ns / requests / 1000, "queue_us": queue_ns / requests / 1000}


def settled_backend_ns(
    server: Any, model: str, count: int, timeout: float = 10.0
) -> tuple[int, int]:
    """backend_ns() once Triton has counted ``count`` successful requests of ``model``: the
    backend reports a request's statistics after its response is sent, so a client that has
    its answer can read the endpoint a request short (and divide by the wrong count)."""
    deadline = time.monotonic() + timeout
    while True:
        got = backend_ns(server, model)
        if got[0] >= count:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{model}: Triton's statistics count {got[0]} successful requests after "
                f"{timeout:.0f} s, {count} were answered"
            )
        time.sleep(0.005)


def measure(
    server: Any,
    client: Any,
    row: str,
    x: np.ndarray,
    requests: int,
    window: Optional[Callable[[], Any]] = None,
    cuda: Optional[bool] = None,
) -> dict:
    """Backend time, client median and copies per request of ``row`` over ``requests``
    requests after a warm-up. ``window`` (the breakdown's trace file mark) is called right
    before and after the measured requests; its two results are the row's "window". A row
    not in ROWS (bench-pytriton's bound callables) is the model's name, and ``cuda`` says
    whether it gets CUDA shared memory both ways (a row of ROWS: its model's kind)."""
    import tritonclient.grpc as grpcclient

    model = ROWS[row][0] if row in ROWS else row
    gpu = on_gpu(row) if cuda is None else cuda
    infer_input = grpcclient.InferInput("IN", list(x.shape), "FP32")
    output = grpcclient.InferRequestedOutput("OUT")
    regions = []
    try:
        if gpu:
            region_in = gpu_client.CudaRegion(client, f"bench-{row}-in", x.nbytes)
            regions.append(region_in)
            region_out = gpu_client.CudaRegion(client, f"bench-{row}-out", x.nbytes)
            regions.append(region_out)
            region_in.write(x)
            infer_input.set_shared_memory(region_in.name, x.nbytes)
            output.set_shared_memory(region_out.name, x.nbytes)

            def result_of(_: Any) -> np.ndarray:
                return region_out.read(np.float32, x.size)

            def clear() -> None:  # so the check below reads this request's output
                region_out.write(np.zeros_like(x))
        else:
            infer_input.set_data_from_numpy(x)

            def result_of(reply: Any) -> np.ndarray:
                return reply.as_numpy("OUT")

            def clear() -> None:
                pass

        def once() -> float:
            t0 = time.perf_counter()
            client.infer(model, [infer_input], outputs=[output], client_timeout=120)
            return time.perf_counter() - t0

        # Settled: this model's earlier rows waited for their statistics.
        start = backend_ns(server, model)[0]
        callees = {c: backend_ns(server, c)[0] for c in CALLEES.get(model, ())}
        for _ in range(5):
            once()
        clear()
        reply = client.infer(model, [infer_input], outputs=[output], client_timeout=120)
        if not np.array_equal(result_of(reply), x):
            raise AssertionError(f"{row}: the output is not the input")
        marks = [window()] if window else []
        count0, ns0 = settled_backend_ns(server, model, start + 6)  # warm-up and check
        for c, n0 in callees.items():
            settled_backend_ns(server, c, n0 + 6)
        callee0 = {c: inference_stats(server, c) for c in callees}
        copies0 = gpu_client.copies(server.metrics_url, model)
        client_s = [once() for _ in range(requests)]
        count1, ns1 = settled_backend_ns(server, model, start + 6 + requests)
        for c, n0 in callees.items():
            settled_backend_ns(server, c, n0 + 6 + requests)
        callee1 = {c: inference_stats(server, c) for c in callees}
        copies1 = gpu_client.copies(server.metrics_url, model)
        marks += [window()] if window else []
    finally:
        for region in regions:
            region.close()
    n = count1 - count0
    result = {
        "requests": n,
        "backend_us": (ns1 - ns0) / n / 1000,
        "client_median_us": statistics.median(client_s) * 1e6,
        "copies_per_request": {d: (copies1[d] - copies0[d]) / n for d in gpu_client.DIRECTIONS},
    }
    if callees:
        result["callees"] = {c: callee_split(callee0[c], callee1[c], n) for c in callees}
    if marks:
        result["window"] = marks
    return result


def measure_row(server: Any, client: Any, row: str, x: np.ndarray, args: Any, **kw: Any) -> dict:
    """measure(), or the reason the row could not be measured (the others still are)."""
    try:
        return measure(server, client, row, x, args.requests, **kw)
    except Exception as e:  # a row that fails is reported in the table, not fatal
        return {"error": " ".join(f"{type(e).__name__}: {e}".split())[:300]}


def table(results: dict[str, dict], mib: int, requests: int) -> str:
    base = results["zero_copy"].get("backend_us")
    lines = [
        f"GPU identity, {mib} MiB FP32 (zero_copy_4k: 4 KiB; cpu_tiny: KIND_CPU FP32 [16] "
        f"over gRPC), CUDA shared memory in and out, ours, "
        f"{requests} requests per row after 5 of warm-up",
        "",
        "| row | backend µs/request | vs zero_copy | client median µs | copies/request "
        "(d2d, d2h, h2d) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for row, r in results.items():
        if "error" in r:
            lines.append(f"| {row} | failed: {r['error']} | | | |")
            continue
        ratio = f"{r['backend_us'] / base:.2f}x" if base else "-"
        c = r["copies_per_request"]
        lines.append(
            f"| {row} | {r['backend_us']:.0f} | {ratio} | "
            f"{r['client_median_us']:.0f} | {c['d2d']:g}, {c['d2h']:g}, {c['h2d']:g} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--server-log", type=Path, help="append the server's log here")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="where the time goes instead (benchmarks/gpu_breakdown.py): per-stage timers "
        "for each of --switches, and the two copies measured alone",
    )
    parser.add_argument(
        "--switches",
        default="1,1:legacy",
        help="--breakdown: the settings to compare, POOL[:STREAM[:SPIN]] each "
        "(PYBACKEND_GPU_LEND_POOL, PYBACKEND_DLPACK_STREAM and the backend's ipc-spin-us; "
        "default 1,1:legacy; 1::1000 is the pool on, the proxy stream, a 1 ms spin)",
    )
    parser.add_argument(
        "--cpu-only",
        action="store_true",
        help="--breakdown: the CPU rows alone (tiny and BLS, no GPU needed): their stages, "
        "the stub's turn in the server and the protocol, on any machine",
    )
    args = parser.parse_args(argv)
    if args.breakdown:
        from benchmarks import gpu_breakdown

        return gpu_breakdown.main(args)
    missing = gpu_missing()
    if missing:
        print(f"gpu_identity: skipped: no GPU: {missing}")
        return 0

    import tritonclient.grpc as grpcclient

    from pybackend.server import TritonServer

    with tempfile.TemporaryDirectory(prefix="gpu-identity-") as tmp:
        server = TritonServer(write_repository(Path(tmp)), backend="ours", ready_timeout=180.0)
        try:
            with server:
                client = grpcclient.InferenceServerClient(server.grpc_url)
                try:
                    results = {
                        row: measure_row(server, client, row, row_input(row, args.mib), args)
                        for row in ROWS
                    }
                finally:
                    client.close()
        finally:
            if args.server_log:
                with args.server_log.open("a", encoding="utf-8") as log:
                    log.write(f"===== benchmarks.gpu_identity {server!r}\n{server.log_text()}\n")
    text = table(results, args.mib, args.requests)
    print(text)
    print(json.dumps(results, indent=1))
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
