"""The few CUDA driver calls the stub makes, through ctypes on ``libcuda.so.1``.

pybackend never imports torch or cupy and needs no CUDA toolkit: the driver library is
opened the first time a GPU tensor is met (:func:`driver`), so a model that never touches
one loads nothing and creates no CUDA context (UV-28). Every call's result is checked; a
failure raises :class:`CudaError` naming the call, the driver's error name and a fix.

Contexts: each call runs in the *primary* context of the device it is about (the one
torch, cupy and the CUDA runtime use), pushed for the call and popped after, so the
calling thread's own current context is left as it was.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Any, Dict, Iterator, Optional, Tuple

from .errors import TritonModelException

LIBRARY = "libcuda.so.1"
CUDA_SUCCESS = 0
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1
CU_STREAM_NON_BLOCKING = 0x1
#: The legacy default stream's handle (cuda.h's CU_STREAM_LEGACY; DLPack's stream ``1``).
CU_STREAM_LEGACY = 0x1
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
IPC_HANDLE_BYTES = 64
# Set by the backend when it isolates the stub with CUDA_VISIBLE_DEVICES (model parameter
# ISOLATE_GPU): the one device this process sees is that device of the backend's numbering.
ISOLATED_DEVICE_ENV = "PYBACKEND_ISOLATED_DEVICE"
# Which stream Tensor.from_dlpack hands a CUDA producer's __dlpack__: "proxy" (unset, the
# original's: our own non-blocking stream per device) or "legacy" (DLPack's 1, the legacy
# default stream). Either way the stub then waits for that stream on the host, so the
# producer's work is complete before the backend reads the memory. With "legacy" a producer
# whose current stream is the default one (torch's and cupy's unless a model picks another)
# orders nothing: torch skips the ExternalStream and the event it makes for any other stream,
# about 80 us a call on the H200 (benchmarks/RESULTS.md, issue 31). Opt-in until measured on
# a GPU (docs/gpu.md).
DLPACK_STREAM_ENV = "PYBACKEND_DLPACK_STREAM"

_u64 = ctypes.c_uint64
_ptr = ctypes.c_void_p
_size_p = ctypes.POINTER(ctypes.c_size_t)


class CudaIpcHandle(ctypes.Structure):
    """``CUipcMemHandle``: 64 opaque bytes, passed by value. (c_ubyte, not c_char: a
    c_char array field reads as bytes cut at the first NUL.) Made from bytes with
    ``from_buffer_copy``, read back with ``bytes(handle)``."""

    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


class CudaError(TritonModelException):
    """A CUDA driver call failed; ``name`` is the driver's error name (CUDA_ERROR_...)."""

    def __init__(self, message: str, call: str = "", name: str = "") -> None:
        super().__init__(message)
        self.call = call
        self.name = name


# (name in libcuda, restype, argtypes). The _v2 names are the 64-bit entry points the CUDA
# headers map the plain names to; the plain symbols keep their old 32-bit signatures.
_SIGNATURES: Tuple[Tuple[str, Any, Tuple[Any, ...]], ...] = (
    ("cuInit", ctypes.c_int, (ctypes.c_uint,)),
    ("cuGetErrorName", ctypes.c_int, (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))),
    ("cuDeviceGet", ctypes.c_int, (ctypes.POINTER(ctypes.c_int), ctypes.c_int)),
    ("cuDeviceGetCount", ctypes.c_int, (ctypes.POINTER(ctypes.c_int),)),
    ("cuDevicePrimaryCtxRetain", ctypes.c_int, (ctypes.POINTER(_ptr), ctypes.c_int)),
    ("cuCtxPushCurrent_v2", ctypes.c_int, (_ptr,)),
    ("cuCtxPopCurrent_v2", ctypes.c_int, (ctypes.POINTER(_ptr),)),
    ("cuCtxSetCurrent", ctypes.c_int, (_ptr,)),
    ("cuCtxSynchronize", ctypes.c_int, ()),
    ("cuStreamCreate", ctypes.c_int, (ctypes.POINTER(_ptr), ctypes.c_uint)),
    ("cuStreamSynchronize", ctypes.c_int, (_ptr,)),
    ("cuPointerGetAttribute", ctypes.c_int, (_ptr, ctypes.c_int, _u64)),
    ("cuMemGetAddressRange_v2", ctypes.c_int, (ctypes.POINTER(_u64), _size_p, _u64)),
    ("cuIpcGetMemHandle", ctypes.c_int, (ctypes.POINTER(CudaIpcHandle), _u64)),
    ("cuIpcOpenMemHandle_v2", ctypes.c_int, (ctypes.POINTER(_u64), CudaIpcHandle, ctypes.c_uint)),
    ("cuIpcCloseMemHandle", ctypes.c_int, (_u64,)),
    ("cuMemcpyDtoH_v2", ctypes.c_int, (_ptr, _u64, ctypes.c_size_t)),
    ("cuMemcpyHtoD_v2", ctypes.c_int, (_u64, _ptr, ctypes.c_size_t)),
)  # fmt: skip


class Driver:
    """``libcuda.so.1``, loaded. One per process (:func:`driver`); thread-safe."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        for name, restype, argtypes in _SIGNATURES:
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise CudaError(
                    f"{LIBRARY} lacks {name}: update the NVIDIA driver", "dlsym"
                ) from None
            fn.restype = restype
            fn.argtypes = list(argtypes)
        self._lock = threading.Lock()
        self._contexts: Dict[int, int] = {}  # device ordinal -> its primary context
        self._streams: Dict[int, int] = {}  # device ordinal -> our proxy stream
        self.check(lib.cuInit(0), "cuInit", "is the NVIDIA driver installed and a GPU visible?")

    # ------------------------------------------------------------------ errors

    def error_name(self, rc: int) -> str:
        name = ctypes.c_char_p()
        if self._lib.cuGetErrorName(rc, ctypes.byref(name)) != CUDA_SUCCESS or not name.value:
            return f"CUDA error {rc}"
        return name.value.decode("ascii", "replace")

    def check(self, rc: int, call: str, fix: str = "") -> None:
        if rc == CUDA_SUCCESS:
            return
        name = self.error_name(rc)
        text = f"CUDA driver call {call} failed with {name}"
        raise CudaError(text + (f": {fix}" if fix else ""), call, name)

    # ------------------------------------------------------------------ contexts

    def _context(self, device: int) -> int:
        ctx = self._contexts.get(device)
        if ctx is None:
            with self._lock:
                ctx = self._contexts.get(device)
                if ctx is None:
                    dev = ctypes.c_int()
                    self.check(
                        self._lib.cuDeviceGet(ctypes.byref(dev), device),
                        "cuDeviceGet",
                        f"device {device} is not visible to this process (CUDA_VISIBLE_DEVICES?)",
                    )
                    handle = _ptr()
                    self.check(
                        self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(handle), dev.value),
                        "cuDevicePrimaryCtxRetain",
                    )
                    ctx = self._contexts[device] = int(handle.value or 0)
        return ctx

    @contextlib.contextmanager
    def on(self, device: int) -> Iterator[None]:
        """Run the body in ``device``'s primary context (pushed, popped afterwards)."""
        self.check(self._lib.cuCtxPushCurrent_v2(_ptr(self._context(device))), "cuCtxPushCurrent")
        try:
            yield
        finally:
            popped = _ptr()
            self._lib.cuCtxPopCurrent_v2(ctypes.byref(popped))

    def make_current(self, device: int) -> None:
        """Make ``device``'s primary context current on the calling thread (a KIND_GPU
        instance's main thread: torch and cupy then start on the instance's device)."""
        self.check(self._lib.cuCtxSetCurrent(_ptr(self._context(device))), "cuCtxSetCurrent")

    # ------------------------------------------------------------------ streams

    def proxy_stream(self, device: int) -> int:
        """Our stream on ``device`` for ``__dlpack__(stream=...)`` hand-offs (spec §6.4)."""
        stream = self._streams.get(device)
        if stream is None:
            handle = _ptr()
            with self.on(device):
                self.check(
                    self._lib.cuStreamCreate(ctypes.byref(handle), CU_STREAM_NON_BLOCKING),
                    "cuStreamCreate",
                )
            stream = self._streams.setdefault(device, int(handle.value or 0))
        return stream

    def sync_stream(self, device: int, stream: int) -> None:
        with self.on(device):
            self.check(self._lib.cuStreamSynchronize(_ptr(stream)), "cuStreamSynchronize")

    def synchronize(self, device: int) -> None:
        """Wait for all work queued on ``device`` (a bare capsule names no stream)."""
        with self.on(device):
            self.check(self._lib.cuCtxSynchronize(), "cuCtxSynchronize")

    # ------------------------------------------------------------------ memory

    def address_range(self, device: int, ptr: int) -> Tuple[int, int]:
        """(base, size) of the allocation holding ``ptr`` as this process sees it."""
        base = _u64()
        size = ctypes.c_size_t()
        with self.on(device):
            self.check(
                self._lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr),
                "cuMemGetAddressRange",
            )
        return int(base.value), int(size.value)

    def ipc_handle(self, device: int, base: int) -> bytes:
        """The IPC handle of the allocation starting at ``base``. Raises CudaError where the
        memory cannot be shared (virtual memory management or stream-ordered pools, memory
        this process imported, WSL): the caller stages through host memory then."""
        handle = CudaIpcHandle()
        with self.on(device):
            rc = self._lib.cuIpcGetMemHandle(ctypes.byref(handle), base)
            self.check(rc, "cuIpcGetMemHandle")
        return bytes(handle)

    def open_ipc(self, device: int, handle: bytes) -> int:
        """Map another process's allocation; returns its base address here."""
        h = CudaIpcHandle.from_buffer_copy(handle)
        ptr = _u64()
        with self.on(device):
            lazy = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
            self.check(
                self._lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, lazy),
                "cuIpcOpenMemHandle",
                "CUDA IPC needs both processes on the same machine and in the same container "
                '(not WSL); set the model parameter FORCE_CPU_ONLY_INPUT_TENSORS to "yes" to '
                "receive inputs in host memory instead",
            )
        return int(ptr.value)

    def close_ipc(self, device: int, ptr: int) -> None:
        with self.on(device):
            self.check(self._lib.cuIpcCloseMemHandle(ptr), "cuIpcCloseMemHandle")

    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        """Device -> host, complete when this returns."""
        with self.on(device):
            self.check(self._lib.cuMemcpyDtoH_v2(_ptr(dst), src, nbytes), "cuMemcpyDtoH")

    def copy_to_device(self, device: int, dst: int, src: int, nbytes: int) -> None:
        """Host -> device; synchronized, so the host buffer may be reused at once."""
        with self.on(device):
            self.check(self._lib.cuMemcpyHtoD_v2(dst, _ptr(src), nbytes), "cuMemcpyHtoD")
            self.check(self._lib.cuCtxSynchronize(), "cuCtxSynchronize")


_DRIVER: Optional[Driver] = None


def handoff_legacy(value: Optional[str]) -> bool:
    """Whether DLPACK_STREAM_ENV's value asks for the legacy default stream (any case)."""
    return (value or "").strip().lower() == "legacy"


#: Read once: a process's environment (tritonserver's, which the stub inherits) is fixed.
HANDOFF_LEGACY = handoff_legacy(os.environ.get(DLPACK_STREAM_ENV))


def handoff_stream(drv: "Driver", device: int) -> int:
    """The stream Tensor.from_dlpack passes to a CUDA producer's ``__dlpack__`` and then
    waits for (DLPACK_STREAM_ENV)."""
    if HANDOFF_LEGACY:
        return CU_STREAM_LEGACY
    return drv.proxy_stream(device)


_LOAD_LOCK = threading.Lock()


def driver() -> Driver:
    """The process's driver, loaded on first use. Raises CudaError when it cannot be."""
    global _DRIVER
    d = _DRIVER
    if d is None:
        with _LOAD_LOCK:
            if _DRIVER is None:
                try:
                    lib = ctypes.CDLL(LIBRARY)
                except OSError as e:
                    raise CudaError(
                        f"a GPU tensor needs the NVIDIA driver library {LIBRARY}, which could "
                        f"not be loaded ({e}): run the model on a machine with an NVIDIA GPU "
                        "and driver, or keep its tensors on the CPU",
                        "dlopen",
                    ) from None
                _DRIVER = Driver(lib)
            d = _DRIVER
    return d


def loaded() -> bool:
    """True once a GPU tensor made this process load the driver."""
    return _DRIVER is not None


def use_driver(d: Optional[Driver]) -> Optional[Driver]:
    """Install ``d`` as the process's driver (tests use a fake); returns the previous one."""
    global _DRIVER
    old, _DRIVER = _DRIVER, d
    return old


def to_global(device: int) -> int:
    """This process's device ordinal -> the backend's (they differ when isolated)."""
    isolated = os.environ.get(ISOLATED_DEVICE_ENV)
    return int(isolated) if isolated and device == 0 else device


def to_local(device: int) -> int:
    """The backend's device ordinal -> this process's."""
    isolated = os.environ.get(ISOLATED_DEVICE_ENV)
    return 0 if isolated and int(isolated) == device else device


CUDA_ERROR_NOT_INITIALIZED = 3


def initialized_in_process() -> bool:
    """True when something in this process has initialized the CUDA driver (cuInit), found
    without loading or initializing it: a process that forks must not have (docs/
    instances.md, PYBACKEND_INSTANCE_PROCESS=fork)."""
    if _DRIVER is not None:
        return True
    try:
        lib = ctypes.CDLL(LIBRARY, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False  # never loaded, so never initialized
    ctx = ctypes.c_void_p()
    fn = lib.cuCtxGetCurrent
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    return bool(fn(ctypes.byref(ctx)) != CUDA_ERROR_NOT_INITIALIZED)
