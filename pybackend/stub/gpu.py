"""The stub's side of GPU tensors (docs/gpu.md): sharing an output's device memory with the
backend through CUDA IPC, and keeping it alive until the backend has copied it.

Lifetimes (until the one-ledger refactor of docs/gpu.md): a GPU output that a RESULT or
SEND names is *held* here under a hold id; the backend returns the BlockRef
(GPU_HOLD_SEG, hold) like one of our arena blocks (FREE, or EXECUTE's freed trailer) once it
has copied the bytes, and the hold, with the producer's memory, is dropped then.
"""

from __future__ import annotations

import itertools
import threading
from typing import Callable, Dict, Optional

from ..ipc.codec import GpuRef
from ..ipc.protocol import Owner
from ..utils import cuda_driver
from ..utils.cuda_driver import CudaError
from ..utils.dlpack import DeviceBuffer

IPC_UNAVAILABLE = (
    "CUDA IPC is not available here ({error}); GPU outputs are staged through host memory "
    "(one device-to-host copy in the stub, and one host-to-device copy in the backend when "
    "Triton wants the output on a GPU). This happens under WSL, across containers without a "
    "shared IPC namespace and for memory from virtual-memory or stream-ordered allocators "
    "(e.g. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)."
)


class GpuHolds:
    """GPU outputs of ours the backend may still read, by hold id."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self._warn = warn
        self._warned = False
        self._ids = itertools.count(1)
        self._holds: Dict[int, DeviceBuffer] = {}
        self._lock = threading.Lock()

    def share(self, buf: DeviceBuffer) -> Optional[GpuRef]:
        """``buf`` described for the backend and held until it is returned; None when CUDA
        IPC cannot share it (warned once per process): the caller stages it instead."""
        drv = cuda_driver.driver()
        try:
            handle, offset = drv.ipc_handle(buf.device_id, buf.ptr)
        except CudaError as e:
            if e.call not in ("cuIpcGetMemHandle", "cuMemGetAddressRange"):
                raise
            if not self._warned:
                self._warned = True
                self._warn(IPC_UNAVAILABLE.format(error=e))
            return None
        hold = next(self._ids)
        with self._lock:
            self._holds[hold] = buf
        return GpuRef(int(Owner.STUB), cuda_driver.to_global(buf.device_id), hold, handle, offset)

    def release(self, hold: int) -> bool:
        """The backend is done with ``hold``; False when it was not held."""
        with self._lock:
            buf = self._holds.pop(hold, None)
        return buf is not None  # the memory goes when ``buf`` does, outside the lock

    def __len__(self) -> int:
        return len(self._holds)


def stage_to_host(buf: DeviceBuffer, dst_addr: int) -> None:
    """Copy ``buf`` into host memory at ``dst_addr`` (complete when this returns)."""
    cuda_driver.driver().copy_to_host(buf.device_id, dst_addr, buf.ptr, buf.nbytes)
