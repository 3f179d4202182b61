"""The client side of the GPU check (tests/gpu, and benchmarks/gpu_identity.py, which imports
it from here): CUDA shared memory regions registered through tritonclient's gRPC client, and
the backend's GPU counters read from tritonserver's metrics endpoint.

The backend counts every copy it makes of a model instance's GPU tensors in
pybackend_gpu_copies_total{direction=d2d|d2h|h2d}, and the stub allocations it has mapped now
in pybackend_gpu_ipc_handles_open (csrc/backend/instance_metrics.cc); both carry the labels
model, version and instance. cupy is imported only when a region is made.
"""

from __future__ import annotations

import base64
import re
import urllib.request
from typing import Any

import numpy as np

COPIES = "pybackend_gpu_copies_total"
HANDLES = "pybackend_gpu_ipc_handles_open"
DIRECTIONS = ("d2d", "d2h", "h2d")

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class CudaRegion:
    """A block of GPU memory of this process, registered with the server as CUDA shared
    memory. The block is cudaMalloc'd on its own (not from cupy's pool): an IPC handle names a
    whole allocation, and Triton maps it from its base. tritonclient's gRPC client takes the
    64-byte cudaIpcMemHandle_t in base64 (it decodes it into the request)."""

    def __init__(self, client: Any, name: str, nbytes: int, device: int = 0) -> None:
        import cupy as cp

        self.client, self.name, self.nbytes = client, name, nbytes
        with cp.cuda.Device(device):
            self.memory = cp.cuda.Memory(nbytes)
        handle = cp.cuda.runtime.ipcGetMemHandle(self.memory.ptr)
        client.register_cuda_shared_memory(name, base64.b64encode(bytes(handle)), device, nbytes)

    def array(self, dtype: Any, count: int) -> Any:
        """A cupy array over the region's first ``count`` elements."""
        import cupy as cp

        return cp.ndarray((count,), dtype, cp.cuda.MemoryPointer(self.memory, 0))

    def write(self, host: np.ndarray) -> None:
        assert host.nbytes <= self.nbytes, (host.nbytes, self.nbytes)
        self.array(host.dtype, host.size).set(np.ascontiguousarray(host).reshape(-1))

    def read(self, dtype: Any, count: int) -> np.ndarray:
        return self.array(dtype, count).get()

    def close(self) -> None:
        self.client.unregister_cuda_shared_memory(self.name)
        self.memory = None  # cudaFree when cupy drops it


def metric_samples(metrics_url: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of one metric on the endpoint."""
    with urllib.request.urlopen(metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match["name"] == name:
            found.append((dict(_LABEL.findall(match["labels"] or "")), float(match["value"])))
    return found


def copies(metrics_url: str, model: str) -> dict[str, float]:
    """direction -> copies the backend made of ``model``'s GPU tensors (all its instances)."""
    counted = dict.fromkeys(DIRECTIONS, 0.0)
    seen = False
    for labels, value in metric_samples(metrics_url, COPIES):
        if labels.get("model") == model:
            seen = True
            counted[labels["direction"]] += value
    assert seen, f"no {COPIES} series for {model} on {metrics_url}"
    return counted


def ipc_handles(metrics_url: str, model: str) -> float:
    """How many of ``model``'s stubs' allocations the backend has mapped now."""
    values = [
        v for labels, v in metric_samples(metrics_url, HANDLES) if labels.get("model") == model
    ]
    assert values, f"no {HANDLES} series for {model} on {metrics_url}"
    return sum(values)
