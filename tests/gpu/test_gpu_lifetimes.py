"""GPU memory and CUDA IPC handles come home, through the real tritonserver: after many
requests that pass GPU tensors every way (client CUDA shared memory in and out, an ensemble's
GPU intermediate tensor, BLS with GPU inputs and outputs) the device's memory and the
backend's open handles are where they were; a stub killed (SIGKILL) while it holds GPU
tensors leaves nothing behind, the server keeps serving and the restarted stub works.

Device memory is the driver's view (total - free), which is what a leak of any process
(the server, a stub, or memory a dead stub's handles keep alive) shows in."""

from __future__ import annotations

import os
import signal
import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pytest
from gpu_support import (
    CudaRegion,
    compute_apps,
    device_used_bytes,
    infer,
    ipc_handles,
    request_parts,
    sample,
    wait_for,
)

if TYPE_CHECKING:
    from pybackend.server import TritonServer

pytestmark = pytest.mark.gpu

MiB = 1 << 20
#: Requests of each kind in the many-requests test (after the warm-up).
ROUNDS = 200
#: Slack on device memory: allocator rounding and the frees the last request's blocks
#: wait for (they ride on the next request). A leak of one 4 MiB tensor per request would
#: be 800 MiB; the killed stub's output alone is 128 MiB.
MEMORY_SLACK = 48 * MiB
#: Python models whose stubs hand GPU memory to the backend in the many-requests test.
SHARING_MODELS = ("torch_copy_no", "ens_produce", "bls_gpu")


def memory_settles(baseline: int, timeout: float = 20.0) -> int:
    """Wait (bounded) until device memory is back within MEMORY_SLACK of baseline."""

    def probe() -> int | None:
        used = device_used_bytes()
        return used if used <= baseline + MEMORY_SLACK else None

    try:
        return wait_for("device memory to return to its baseline", probe, timeout)
    except AssertionError:
        used = device_used_bytes()
        raise AssertionError(
            f"device memory {used / MiB:.0f} MiB, baseline {baseline / MiB:.0f} MiB "
            f"(+{(used - baseline) / MiB:.0f} MiB, slack {MEMORY_SLACK / MiB:.0f} MiB)\n"
            f"{compute_apps()}"
        ) from None


def handles_settle(server: TritonServer, expected: dict[str, float], timeout: float = 10.0) -> None:
    """Wait (bounded) until no model has more IPC handles open than ``expected``."""

    def probe() -> bool | None:
        now = {m: ipc_handles(server, m) for m in expected}
        return True if all(now[m] <= expected[m] for m in expected) else None

    try:
        wait_for("the backend's IPC handles to settle", probe, timeout)
    except AssertionError:
        now = {m: ipc_handles(server, m) for m in expected}
        raise AssertionError(f"IPC handles open {now}, expected at most {expected}") from None


def test_many_requests_leave_device_memory_and_ipc_handles_flat(
    grpc: Any, gpu_server: TritonServer, cuda_regions: Callable[[int], CudaRegion]
) -> None:
    """ROUNDS rounds of: a CUDA shared-memory input staged by the backend for the stub and a
    GPU output into the client's region; an ensemble whose intermediate GPU tensor the next
    stub maps; BLS with a GPU input and a GPU output lent to the stub. Every block lent,
    mapped or held must come back: device memory and open handles end where they began."""
    x = sample()
    region_in, region_out = cuda_regions(x.nbytes), cuda_regions(x.nbytes)
    prefer_gpu = np.array([True])

    def one_round() -> None:
        got = infer(
            grpc, gpu_server, "torch_copy_no", {"IN": (region_in, x)}, ["OUT"],
            {"OUT": (region_out, x.nbytes)},
        )  # fmt: skip
        np.testing.assert_array_equal(got["OUT"], x)
        got = infer(grpc, gpu_server, "ensemble_gpu", {"IN": x}, ["OUT"])
        np.testing.assert_allclose(got["OUT"], x * 2, rtol=1e-6)
        got = infer(grpc, gpu_server, "bls_gpu", {"IN": x, "PREFER_GPU": prefer_gpu}, ["OUT"])
        np.testing.assert_array_equal(got["OUT"], x)

    for _ in range(5):  # every stub has its CUDA context and its allocator's blocks
        one_round()
    baseline = device_used_bytes()
    handles = {m: ipc_handles(gpu_server, m) for m in SHARING_MODELS}
    for _ in range(ROUNDS):
        one_round()
    memory_settles(baseline)
    handles_settle(gpu_server, handles)
    assert gpu_server.is_alive()


def test_a_stub_killed_while_holding_gpu_tensors_leaks_nothing(
    grpc: Any, gpu_server: TritonServer, cuda_regions: Callable[[int], CudaRegion]
) -> None:
    """gpu_hold is killed while it holds a GPU input from the client's CUDA shared memory and
    a 128 MiB GPU output of its own (whose memory the backend maps through CUDA IPC). The
    request fails, every other model keeps serving, the backend closes the dead stub's
    handles (its gauge drops to 0), the restarted stub computes correctly, and the device's
    memory returns to what it was with the old stub."""
    x = np.arange(32 * MiB, dtype=np.float32) % 1000  # 128 MiB
    region_in, region_out = cuda_regions(x.nbytes), cuda_regions(x.nbytes)
    repository = gpu_server.model_repository / "gpu_hold"
    outputs = {"OUT": (region_out, x.nbytes)}

    def inputs(hold: int) -> dict[str, Any]:
        return {"IN": (region_in, x), "HOLD": np.array([hold], dtype=np.int32)}

    def works() -> None:
        region_out.write(np.zeros_like(x))
        got = infer(grpc, gpu_server, "gpu_hold", inputs(0), ["OUT"], outputs)
        np.testing.assert_array_equal(got["OUT"], x * 2)

    works()
    handles_before = ipc_handles(gpu_server, "gpu_hold")
    baseline = device_used_bytes()

    finished = threading.Event()
    outcome: dict[str, Any] = {}

    def done(result: Any, error: Any) -> None:
        outcome.update(result=result, error=error)
        finished.set()

    infer_inputs, requested = request_parts(inputs(120), ["OUT"], outputs)
    grpc.async_infer("gpu_hold", infer_inputs, done, outputs=requested, client_timeout=90)
    marker = wait_for(
        "gpu_hold to hold its GPU tensors",
        lambda: next(repository.glob("holding-*"), None),
        timeout=60,
    )
    pid = int(marker.name.split("-", 1)[1])
    marker.unlink()
    os.kill(pid, signal.SIGKILL)
    assert finished.wait(90), "the killed stub's request never finished"
    assert outcome["error"] is not None, "the request of the killed stub succeeded"

    # The backend let go of everything the dead stub had shared with it.
    wait_for(
        "the dead stub's IPC handles to be closed",
        lambda: True if ipc_handles(gpu_server, "gpu_hold") == 0 else None,
        timeout=30,
    )
    # The other models never noticed.
    got = infer(grpc, gpu_server, "torch_copy_no", {"IN": x[:16]}, ["OUT"])
    np.testing.assert_array_equal(got["OUT"], x[:16])
    # The restarted stub serves (it may take a few seconds to start and import torch).
    wait_for("the restarted gpu_hold to serve", lambda: _served(works), timeout=90, every=1.0)
    handles_settle(gpu_server, {"gpu_hold": handles_before})
    memory_settles(baseline)
    assert gpu_server.is_alive()


def _served(attempt: Callable[[], None]) -> bool | None:
    from tritonclient.utils import InferenceServerException

    try:
        attempt()
    except InferenceServerException:
        return None
    return True
