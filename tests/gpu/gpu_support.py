"""What the GPU tests share: inference over gRPC (optionally through CUDA shared memory, see
gpu_client.py), the backend's own GPU counters per model, the device's memory, bounded waits.
Copies are counted, not assumed: every count here is read from the backend's metrics."""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import gpu_client
import numpy as np
import pytest
from gpu_client import DIRECTIONS, CudaRegion

if TYPE_CHECKING:
    from pybackend.server import TritonServer

#: What the stub logs once when it has to stage GPU outputs through host memory
#: (pybackend/stub/gpu.py): a zero-copy test fails if it appears.
STAGING_WARNING = "CUDA IPC is not available here"

#: A file each server's log is appended to when it stops (scripts/gpu_check.sh sets it).
SERVER_LOG_ENV = "PYBACKEND_GPU_SERVER_LOG"

T = TypeVar("T")

#: DLPack device types (__dlpack_device__): host memory and CUDA memory.
KDL_CPU, KDL_CUDA = 1, 2
#: Requests per case: every count below is per request, so N of them must count N times.
N = 3
#: 1 Mi FP32 elements (4 MiB): the size a real model moves, past every inline path.
SIZE = 1 << 20


def sample() -> np.ndarray:
    """SIZE distinct values: a copy that lost or shifted bytes shows."""
    return np.linspace(-1, 1, SIZE, dtype=np.float32)


def needs_framework(model: str) -> None:
    """Skip a cupy model's case where the machine has no cupy (its stub could not load it)."""
    if model.startswith("cupy"):
        pytest.importorskip("cupy", reason="cupy is not installed on this GPU machine")


def assert_no_staging(server: TritonServer) -> None:
    assert STAGING_WARNING not in server.log_text(), (
        "a stub staged GPU tensors through host memory instead of sharing them over CUDA IPC"
    )


def assert_pointers(ptrs: np.ndarray, view: bool) -> None:
    """PTRS of a view model: IN imported twice is one address (the input is mapped once, not
    copied per import), the tensor given to Tensor.from_dlpack and OUT read back through
    from_dlpack are one address (neither from_dlpack nor to_dlpack copied), and for a view
    all four are one."""
    ins, outs = ptrs.tolist()[:2], ptrs.tolist()[2:]
    assert ins[0] != 0 and ins == [ins[0]] * 2, ptrs.tolist()
    assert outs[0] != 0 and outs == [outs[0]] * 2, ptrs.tolist()
    assert (ins[0] == outs[0]) == view, ptrs.tolist()


# ------------------------------------------------------------------ servers
@contextlib.contextmanager
def serve(
    repository: Path,
    env: Mapping[str, str] | None = None,
    model_control_mode: str | None = None,
) -> Iterator[TritonServer]:
    """A tritonserver with our backend on ``repository`` (``env`` added to its environment),
    started with --exit-on-error=false and --strict-readiness=false so that a model failing
    to load fails its own tests only. Its log goes to SERVER_LOG_ENV when it stops.
    ``model_control_mode`` "explicit" lets a test load models (with a config of its own)."""
    from pybackend.server import TritonServer

    server = TritonServer(
        repository,
        backend="ours",
        env=env,
        ready_timeout=180.0,
        model_control_mode=model_control_mode,
        extra_args=["--exit-on-error=false", "--strict-readiness=false"],
    )
    try:
        with server:
            yield server
    finally:
        target = os.environ.get(SERVER_LOG_ENV)
        if target:
            with open(target, "a", encoding="utf-8") as log:
                log.write(f"===== {server!r}\n{server.log_text()}\n")
    assert not server.killed_stragglers, (
        f"stub processes outlived tritonserver and had to be killed: {server.killed_stragglers}"
    )


@contextlib.contextmanager
def cuda_regions_of(client: Any, prefix: str) -> Iterator[Callable[[int], CudaRegion]]:
    """make(nbytes): a CUDA shared-memory region of this process registered with the server
    of ``client``; every region made is unregistered and freed at the end."""
    pytest.importorskip("cupy", reason="the client side of CUDA shared memory uses cupy")
    made: list[CudaRegion] = []

    def make(nbytes: int) -> CudaRegion:
        made.append(CudaRegion(client, f"{prefix}-{os.getpid()}-{len(made)}", nbytes))
        return made[-1]

    try:
        yield make
    finally:
        for region in made:
            region.close()


def log_tail(server: TritonServer, chars: int = 4000) -> str:
    return f"server log tail:\n{server.log_text()[-chars:]}"


# ------------------------------------------------------------------ inference
Inputs = Mapping[str, "np.ndarray | tuple[CudaRegion, np.ndarray]"]
ShmOutputs = Mapping[str, "tuple[CudaRegion, int]"]


def infer(
    client: Any,
    server: TritonServer,
    model: str,
    inputs: Inputs,
    outputs: Sequence[str],
    shm_outputs: ShmOutputs | None = None,
) -> dict[str, np.ndarray]:
    """One request; an input given as (region, array) is written into that CUDA region and
    sent through it, an output in shm_outputs (name -> (region, byte size)) is received into
    its region and read back from the GPU. Returns every output by name."""
    assert client.is_model_ready(model), (
        f"{model} did not load; server log tail:\n{server.log_text()[-4000:]}"
    )
    infer_inputs, requested = request_parts(inputs, outputs, shm_outputs or {})
    result = client.infer(model, infer_inputs, outputs=requested, client_timeout=60)
    return read_outputs(model, result, outputs, shm_outputs or {})


def infer_at_once(
    client: Any, server: TritonServer, model: str, requests: Sequence[tuple[list[Any], list[Any]]]
) -> list[Any]:
    """Sends every request of ``requests`` (tritonclient InferInputs, InferRequestedOutputs)
    to ``model`` at once (async_infer, so a batcher can gather them) and returns the results
    in the order given; fails on an error response or an answer missing after 90 s, with the
    server's log."""
    answers: queue.Queue[tuple[int, Any, Any]] = queue.Queue()
    for i, (infer_inputs, requested) in enumerate(requests):
        client.async_infer(
            model,
            infer_inputs,
            functools.partial(lambda i, result, error: answers.put((i, result, error)), i),
            outputs=requested,
            client_timeout=60,
        )
    results: dict[int, Any] = {}
    for _ in requests:
        try:
            i, result, error = answers.get(timeout=90)
        except queue.Empty:
            raise AssertionError(
                f"{len(results)} of {len(requests)} answers from {model}; {log_tail(server)}"
            ) from None
        assert error is None, f"{model}, request {i}: {error}; {log_tail(server)}"
        results[i] = result
    return [results[i] for i in range(len(requests))]


def request_parts(
    inputs: Inputs, outputs: Sequence[str], shm_outputs: ShmOutputs
) -> tuple[list[Any], list[Any]]:
    """tritonclient's InferInputs and InferRequestedOutputs of a request (see infer)."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import np_to_triton_dtype

    infer_inputs = []
    for name, value in inputs.items():
        region, array = value if isinstance(value, tuple) else (None, value)
        infer_input = grpcclient.InferInput(
            name, list(array.shape), np_to_triton_dtype(array.dtype)
        )
        if region is None:
            infer_input.set_data_from_numpy(array)
        else:
            region.write(array)
            infer_input.set_shared_memory(region.name, array.nbytes)
        infer_inputs.append(infer_input)
    requested = []
    for name in outputs:
        requested.append(grpcclient.InferRequestedOutput(name))
        if name in shm_outputs:
            region, nbytes = shm_outputs[name]
            requested[-1].set_shared_memory(region.name, nbytes)
    return infer_inputs, requested


def read_outputs(
    model: str, result: Any, outputs: Sequence[str], shm_outputs: ShmOutputs
) -> dict[str, np.ndarray]:
    from tritonclient.utils import triton_to_np_dtype

    got = {}
    for name in outputs:
        if name not in shm_outputs:
            got[name] = result.as_numpy(name)
            continue
        meta = result.get_output(name)
        assert meta is not None, f"{model} returned no {name}"
        array = shm_outputs[name][0].read(
            triton_to_np_dtype(meta.datatype), int(np.prod(meta.shape))
        )
        got[name] = array.reshape(list(meta.shape))
    return got


# ------------------------------------------------------------------ the backend's counters
def copies(server: TritonServer, model: str) -> dict[str, float]:
    """direction -> copies the backend made of ``model``'s GPU tensors (all its instances)."""
    return gpu_client.copies(server.metrics_url, model)


def copies_since(server: TritonServer, model: str, before: Mapping[str, float]) -> dict[str, int]:
    now = copies(server, model)
    return {d: int(now[d] - before[d]) for d in DIRECTIONS}


def ipc_handles(server: TritonServer, model: str) -> float:
    """How many of ``model``'s stubs' allocations the backend has mapped now."""
    return gpu_client.ipc_handles(server.metrics_url, model)


# ------------------------------------------------------------------ the device
def device_used_bytes(device: int = 0) -> int:
    """Device memory in use by every process (the driver's view: total - free)."""
    import cupy as cp

    with cp.cuda.Device(device):
        free, total = cp.cuda.runtime.memGetInfo()
    return int(total - free)


def _nvidia_smi(*args: str) -> tuple[str, str | None]:
    """nvidia-smi's output, and why it gave none (None when it ran)."""
    try:
        run = subprocess.run(
            ["nvidia-smi", *args], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return "", str(e)
    return run.stdout, None


def compute_apps() -> str:
    """nvidia-smi's per-process memory, for failure messages."""
    out, why = _nvidia_smi("--query-compute-apps=pid,process_name,used_memory", "--format=csv")
    return f"(nvidia-smi: {why})" if why else out


def process_memory_mib() -> dict[int, int] | None:
    """nvidia-smi's device memory per process (MiB by pid), or None where it lists none
    (under gVisor its per-process view is empty across the PID namespace; on the
    Firecracker machines it lists every process, with the pids /proc shows)."""
    out, _ = _nvidia_smi("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
    found = {}
    for line in out.splitlines():
        pid, _, mib = line.partition(",")
        if pid.strip().isdigit() and mib.strip().isdigit():
            found[int(pid)] = int(mib)
    return found or None


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.2) -> T:
    """probe() until it returns something other than None; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
