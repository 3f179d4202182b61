"""The stub's side of GPU tensors (docs/gpu.md): sharing an output's device memory with the
backend through CUDA IPC, and keeping it alive until the backend has copied it.

The mechanics live here; the stub's ledger (stub/ledger.py) owns both classes and is the
only way in: a GPU output that a RESULT or SEND names is *held* here under a hold id until
the backend returns the BlockRef (GPU_HOLD_SEG, hold) like one of our arena blocks (FREE,
or EXECUTE's freed trailer), and the hold, with the producer's memory, is dropped then.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from ..ipc.codec import GpuRef
from ..ipc.protocol import Owner
from ..utils import cuda_driver, gpu_trace
from ..utils.cuda_driver import CudaError
from ..utils.dlpack import KDL_CUDA, DeviceBuffer

IPC_UNAVAILABLE = (
    "CUDA IPC is not available here ({error}); GPU outputs are staged through host memory "
    "(one device-to-host copy in the stub, and one host-to-device copy in the backend when "
    "Triton wants the output on a GPU). This happens under WSL, across containers without a "
    "shared IPC namespace and for memory from virtual-memory or stream-ordered allocators "
    "(e.g. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)."
)


# The backend's lending pool (csrc/cuda/device_holds.h): on unless tritonserver's environment
# turns it off; the backend sets the variable for every stub it starts from its own decision.
LEND_POOL_ENV = "PYBACKEND_GPU_LEND_POOL"
#: The values that turn the pool off (csrc/cuda/device_holds.cc reads the same).
LEND_POOL_OFF = ("0", "false", "off", "no")


class GpuHolds:
    """GPU outputs of ours the backend may still read, by hold id."""

    def __init__(self, warn: Callable[[str], None], mappings: "GpuMappings") -> None:
        self._warn = warn
        self._warned = False
        self._mappings = mappings
        self._ids = itertools.count(1)
        self._holds: Dict[int, DeviceBuffer] = {}
        self._lock = threading.Lock()

    def share(self, buf: DeviceBuffer) -> Optional[GpuRef]:
        """``buf`` described for the backend and held until it is returned; None when CUDA
        IPC cannot share it (warned once per process): the caller stages it instead.

        Memory the backend shared with us (a GPU input, or a view of one) is named by the
        backend's own handle (owner BACKEND): memory a process imported cannot be exported
        again, and the backend needs no mapping to read its own memory."""
        drv = cuda_driver.driver()
        if gpu_trace.ON:
            t0 = gpu_trace.now()
        try:
            # A tensor at the start of the backend's memory (an input returned as it is, the
            # zero-copy identity) is found without a driver call: its mapping's base is it.
            base = buf.ptr
            theirs = self._mappings.find(base)
            if theirs is None:
                base, _ = drv.address_range(buf.device_id, buf.ptr)
                theirs = self._mappings.find(base)
            if theirs is not None:
                owner, device, handle = int(Owner.BACKEND), theirs[0], theirs[1]
            else:
                handle = drv.ipc_handle(buf.device_id, base)
                owner, device = int(Owner.STUB), cuda_driver.to_global(buf.device_id)
        except CudaError as e:
            if e.call not in ("cuIpcGetMemHandle", "cuMemGetAddressRange"):
                raise
            if not self._warned:
                self._warned = True
                self._warn(IPC_UNAVAILABLE.format(error=e))
            return None
        if gpu_trace.ON:
            mine = owner == Owner.STUB
            gpu_trace.record("output.share" if mine else "output.share_backend", t0)
        hold = next(self._ids)
        with self._lock:
            self._holds[hold] = buf
        return GpuRef(owner, device, hold, handle, buf.ptr - base)

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


class GpuMappings:
    """The backend's device memory mapped here (cuIpcOpenMemHandle), for GPU inputs.

    Memory of Triton's that the backend shares as it is (hold 0: its CUDA pool, an ensemble
    step's output) is mapped once per allocation and the mapping kept for the next request
    (Triton's pool is then mapped once). A mapping is only closed while no tensor uses it:
    idle mappings beyond MAX_IDLE_BYTES or MAX_OPEN go, oldest first (a mapping keeps
    Triton's allocation from returning to the driver even after Triton freed it). Memory
    lent for one tensor (a hold) is mapped for that tensor and closed, then returned to the
    backend with ``give_back(hold)``, when the tensor dies; under the backend's lending pool
    (``keep_lent``, on unless PYBACKEND_GPU_LEND_POOL=0, csrc/cuda/device_holds.h) the backend lends
    the same allocations again, so their mappings are cached like Triton's memory instead
    (the hold still goes back when the tensor dies).
    """

    MAX_OPEN = 64
    MAX_IDLE_BYTES = 256 << 20

    def __init__(self, give_back: Callable[[int], None], keep_lent: Optional[bool] = None) -> None:
        self._give_back = give_back
        if keep_lent is None:
            # The backend's rule (csrc/cuda/device_holds.cc), which sets the variable for
            # every stub it starts; unset (attach mode) is on, as there.
            keep_lent = os.environ.get(LEND_POOL_ENV, "1").lower() not in LEND_POOL_OFF
        self.keep_lent = keep_lent
        # Cached mappings of Triton's memory, oldest use first: key -> base here
        self._open: "collections.OrderedDict[Tuple[int, bytes], int]" = collections.OrderedDict()
        self._users: Dict[int, int] = {}  # base -> live tensors over a cached mapping
        self._sizes: Dict[int, int] = {}  # base -> size of the mapped allocation
        # Every live mapping, cached or lent: base here -> (the backend's device, handle)
        self._bases: Dict[int, Tuple[int, bytes]] = {}
        # Reentrant: a tensor may die (and unref its mapping) in a GC pass inside the lock.
        self._lock = threading.RLock()

    def find(self, base: int) -> Optional[Tuple[int, bytes]]:
        """(the backend's device number, handle) of the backend allocation mapped at
        ``base``, or None when ``base`` is not one of ours."""
        return self._bases.get(base)

    def buffer(self, ref: GpuRef, nbytes: int) -> DeviceBuffer:
        """A DeviceBuffer over the ``nbytes`` that ``ref`` names."""
        drv = cuda_driver.driver()
        device = cuda_driver.to_local(ref.device)
        if ref.hold == 0:
            return self._cached(drv, device, ref, nbytes)
        if self.keep_lent:
            return self._cached(drv, device, ref, nbytes, ref.hold)
        if gpu_trace.ON:
            t0 = gpu_trace.now()
        base = drv.open_ipc(device, bytes(ref.handle))
        if gpu_trace.ON:
            gpu_trace.record("map.open_lent", t0)
        self._bases[base] = (ref.device, bytes(ref.handle))
        hold = ref.hold
        give_back = self._give_back
        bases = self._bases

        def release() -> None:
            bases.pop(base, None)
            try:
                if gpu_trace.ON:
                    t0 = gpu_trace.now()
                drv.close_ipc(device, base)
                if gpu_trace.ON:
                    gpu_trace.record("map.close_lent", t0)
            finally:
                give_back(hold)

        return DeviceBuffer(base + ref.offset, nbytes, KDL_CUDA, device, release=release)

    def _cached(
        self, drv: Any, device: int, ref: GpuRef, nbytes: int, hold: int = 0
    ) -> DeviceBuffer:
        """A buffer over a cached mapping; ``hold``: lent memory, given back when the buffer
        dies (the mapping stays)."""
        key = (device, bytes(ref.handle))
        with self._lock:
            base = self._open.get(key)
            if base is None:
                if gpu_trace.ON:
                    t0 = gpu_trace.now()
                base = drv.open_ipc(device, key[1])
                if gpu_trace.ON:
                    gpu_trace.record("map.open", t0)
                self._open[key] = base
                self._bases[base] = (ref.device, key[1])
                self._sizes[base] = drv.address_range(device, base)[1]
                self._users[base] = 0
            else:
                if gpu_trace.ON:
                    gpu_trace.count("map.hit")
                self._open.move_to_end(key)
            self._users[base] += 1
            self._trim(drv)
        if not hold:
            release: Callable[[], None] = lambda: self._unuse(drv, base)  # noqa: E731
        else:
            give_back = self._give_back

            def release() -> None:
                try:
                    self._unuse(drv, base)
                finally:
                    give_back(hold)

        return DeviceBuffer(base + ref.offset, nbytes, KDL_CUDA, device, release=release)

    def _unuse(self, drv: Any, base: int) -> None:
        with self._lock:
            if base in self._users:
                self._users[base] -= 1
                self._trim(drv)

    def _trim(self, drv: Any) -> None:
        """Close idle cached mappings, oldest first, while over the bounds (lock held)."""
        idle = [(k, b) for k, b in self._open.items() if self._users.get(b) == 0]
        idle_bytes = sum(self._sizes.get(b, 0) for _, b in idle)
        for key, base in idle:
            if len(self._open) <= self.MAX_OPEN and idle_bytes <= self.MAX_IDLE_BYTES:
                break
            idle_bytes -= self._sizes.get(base, 0)
            self._forget(key, base)
            try:
                drv.close_ipc(key[0], base)
            except CudaError:
                pass  # nothing uses it; the driver reclaims it with the process at worst

    def _forget(self, key: Tuple[int, bytes], base: int) -> None:
        self._open.pop(key, None)
        self._bases.pop(base, None)
        self._users.pop(base, None)
        self._sizes.pop(base, None)

    def close(self) -> None:
        with self._lock:
            items = list(self._open.items())
            for key, base in items:
                self._forget(key, base)
        if items:
            drv = cuda_driver.driver()
            for (device, _), base in items:
                try:
                    drv.close_ipc(device, base)
                except CudaError:
                    pass  # the process is ending; the driver reclaims the mapping

    def __len__(self) -> int:
        return len(self._open)
