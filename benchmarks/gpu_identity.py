"""GPU benchmark: a 64 MiB GPU tensor through a python model, zero copy against the host
round trip, on the real tritonserver with our backend (run by scripts/gpu_check.sh).

    python -m benchmarks.gpu_identity [--requests 50] [--mib 64] [--markdown PATH]

The client keeps the tensor on the GPU both ways (CUDA shared memory in and out, cupy), so
only what the backend and the model do differs between the rows:

  zero_copy        FORCE_CPU_ONLY_INPUT_TENSORS "no"; returns Tensor.from_dlpack of its GPU
                   input (a view): what pybackend's GPU tensors are for
  model_round_trip the same input; the model does .cpu().numpy() and back to the GPU before
                   Tensor.from_dlpack: what a model does where GPU tensors cannot pass
  forced_cpu       FORCE_CPU_ONLY_INPUT_TENSORS "yes": the backend copies the input to the
                   host and the model's numpy output back to the GPU

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
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# The CUDA shared-memory client, the counters and the model template live with the GPU tests.
sys.path.insert(0, str(REPO / "tests" / "gpu"))

import gpu_client  # noqa: E402
from gpu_io_models import FP32, model_config, torch_model, write_io_models  # noqa: E402


def _model(make_out: str) -> str:
    return torch_model(f"""
tensor = pb_utils.get_input_tensor_by_name(request, "IN")
responses.append(pb_utils.InferenceResponse([{make_out}]))
""")


#: row -> (FORCE_CPU_ONLY_INPUT_TENSORS, how the model makes OUT from ``tensor``)
ROWS = {
    "zero_copy": ("no", 'pb_utils.Tensor.from_dlpack("OUT", torch.from_dlpack(tensor))'),
    "model_round_trip": (
        "no",
        'pb_utils.Tensor.from_dlpack("OUT", torch.from_numpy('
        "torch.from_dlpack(tensor).cpu().numpy()).to(self.device))",
    ),
    "forced_cpu": ("yes", 'pb_utils.Tensor("OUT", tensor.as_numpy())'),
}


def write_repository(root: Path) -> Path:
    for name, (force_cpu, make_out) in ROWS.items():
        config = model_config(
            name, [FP32.format("IN")], [FP32.format("OUT")], FORCE_CPU_ONLY_INPUT_TENSORS=force_cpu
        )
        write_io_models(root, {name: (config, _model(make_out))})
    return root


def gpu_missing() -> str | None:
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as e:  # ImportError, or cupy's CUDARuntimeError without a driver
        return f"cupy cannot use a GPU here ({type(e).__name__}: {e})"
    return None


def backend_ns(server: Any, model: str) -> tuple[int, int]:
    """(successful requests, compute_input + compute_infer + compute_output ns) so far."""
    url = f"http://{server.http_url}/v2/models/{model}/stats"
    with urllib.request.urlopen(url, timeout=10) as reply:
        stats = json.loads(reply.read())["model_stats"][0]["inference_stats"]
    spent = sum(stats[k]["ns"] for k in ("compute_input", "compute_infer", "compute_output"))
    return stats["success"]["count"], spent


def measure(server: Any, client: Any, model: str, x: np.ndarray, requests: int) -> dict:
    import tritonclient.grpc as grpcclient

    region_in = gpu_client.CudaRegion(client, f"bench-{model}-in", x.nbytes)
    region_out = gpu_client.CudaRegion(client, f"bench-{model}-out", x.nbytes)
    try:
        region_in.write(x)
        infer_input = grpcclient.InferInput("IN", list(x.shape), "FP32")
        infer_input.set_shared_memory(region_in.name, x.nbytes)
        output = grpcclient.InferRequestedOutput("OUT")
        output.set_shared_memory(region_out.name, x.nbytes)

        def once() -> float:
            t0 = time.perf_counter()
            client.infer(model, [infer_input], outputs=[output], client_timeout=120)
            return time.perf_counter() - t0

        for _ in range(5):
            once()
        region_out.write(np.zeros_like(x))
        once()
        if not np.array_equal(region_out.read(np.float32, x.size), x):
            raise AssertionError(f"{model}: the output is not the input")
        count0, ns0 = backend_ns(server, model)
        copies0 = gpu_client.copies(server.metrics_url, model)
        client_s = [once() for _ in range(requests)]
        count1, ns1 = backend_ns(server, model)
        copies1 = gpu_client.copies(server.metrics_url, model)
    finally:
        region_in.close()
        region_out.close()
    n = count1 - count0
    return {
        "requests": n,
        "backend_us": (ns1 - ns0) / n / 1000,
        "client_median_us": statistics.median(client_s) * 1e6,
        "copies_per_request": {d: (copies1[d] - copies0[d]) / n for d in gpu_client.DIRECTIONS},
    }


def measure_row(server: Any, client: Any, row: str, x: np.ndarray, args: Any) -> dict:
    """measure(), or the reason the row could not be measured (the others still are)."""
    try:
        return measure(server, client, row, x, args.requests)
    except Exception as e:  # a row that fails is reported in the table, not fatal
        return {"error": " ".join(f"{type(e).__name__}: {e}".split())[:300]}


def table(results: dict[str, dict], mib: int, requests: int) -> str:
    base = results["zero_copy"].get("backend_us")
    lines = [
        f"GPU identity, {mib} MiB FP32, CUDA shared memory in and out, ours, "
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
    args = parser.parse_args(argv)
    missing = gpu_missing()
    if missing:
        print(f"gpu_identity: skipped: {missing}")
        return 0

    import tritonclient.grpc as grpcclient

    from pybackend.server import TritonServer

    x = np.arange(args.mib * (1 << 20) // 4, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix="gpu-identity-") as tmp:
        server = TritonServer(write_repository(Path(tmp)), backend="ours", ready_timeout=180.0)
        try:
            with server:
                client = grpcclient.InferenceServerClient(server.grpc_url)
                try:
                    results = {row: measure_row(server, client, row, x, args) for row in ROWS}
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
