"""DLPack capsules read and made with ctypes (DLPack ABI v0.8, legacy ``dltensor``
capsules), for device memory numpy cannot import: pybackend never imports torch or cupy.

A consumed capsule is renamed ``used_dlpack`` (spec §6.4) and its ``DLManagedTensor`` is
then ours: :class:`DeviceBuffer` calls the producer's deleter when the last tensor over it
dies, which is what keeps the producer's memory alive meanwhile.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Dict, Optional, Tuple

from . import dtypes
from .errors import TritonModelException

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_INT = 0
KDL_UINT = 1
KDL_FLOAT = 2
KDL_BFLOAT = 4
KDL_BOOL = 6

NOT_CONTIGUOUS = (
    "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in "
    "C-Order are supported."
)
_DLTENSOR = b"dltensor"
_USED = b"used_dlpack"  # module constant: a capsule keeps a pointer to its name

# (type code, bits) -> Triton type
_TO_TRITON: Dict[Tuple[int, int], int] = {
    (KDL_BOOL, 8): dtypes.TYPE_BOOL,
    (KDL_UINT, 8): dtypes.TYPE_UINT8,
    (KDL_UINT, 16): dtypes.TYPE_UINT16,
    (KDL_UINT, 32): dtypes.TYPE_UINT32,
    (KDL_UINT, 64): dtypes.TYPE_UINT64,
    (KDL_INT, 8): dtypes.TYPE_INT8,
    (KDL_INT, 16): dtypes.TYPE_INT16,
    (KDL_INT, 32): dtypes.TYPE_INT32,
    (KDL_INT, 64): dtypes.TYPE_INT64,
    (KDL_FLOAT, 16): dtypes.TYPE_FP16,
    (KDL_FLOAT, 32): dtypes.TYPE_FP32,
    (KDL_FLOAT, 64): dtypes.TYPE_FP64,
    (KDL_BFLOAT, 16): dtypes.TYPE_BF16,
}
_FROM_TRITON: Dict[int, Tuple[int, int]] = {v: k for k, v in _TO_TRITON.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.PYFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
]

# Private prototypes of the C-API calls: setting argtypes on ctypes.pythonapi's own function
# objects would change them for every other user in the process (a model's own ctypes code).
_api = ctypes.pythonapi
_P = ctypes.PYFUNCTYPE
_CAPSULE_DESTRUCTOR = _P(None, ctypes.c_void_p)
_is_valid = _P(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_get_pointer = _P(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)
_set_name = _P(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
_new_capsule = _P(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR)(
    ("PyCapsule_New", _api)
)
_raw_is_valid = _P(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_raw_get_pointer = _P(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)


def is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


def head(capsule: Any) -> DLTensor:
    """The DLTensor of an unconsumed ``dltensor`` capsule (not taken: still the producer's)."""
    if not _is_valid(capsule, _DLTENSOR):
        raise TritonModelException(
            "DLPack capsule has already been consumed or is not a 'dltensor' capsule."
        )
    return DLTensor.from_address(_get_pointer(capsule, _DLTENSOR))


class DeviceBuffer:
    """Device memory a tensor views: ``ptr`` (the first byte), ``nbytes``, the device and
    what keeps the memory alive (``owner``: a consumed DLManagedTensor, an opened IPC
    mapping...). ``release`` runs once, when the last reference dies."""

    __slots__ = ("ptr", "nbytes", "device_type", "device_id", "owner", "_release", "__weakref__")

    def __init__(
        self,
        ptr: int,
        nbytes: int,
        device_type: int,
        device_id: int,
        owner: Any = None,
        release: Any = None,
    ) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.device_type = device_type
        self.device_id = device_id
        self.owner = owner
        self._release = release

    def __del__(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            try:
                release()
            except Exception:  # noqa: BLE001 - nothing can be raised from __del__
                pass


def take(capsule: Any) -> Tuple[DeviceBuffer, int, Tuple[int, ...]]:
    """Consume a ``dltensor`` capsule of device memory: (buffer, Triton type, shape).
    Checks C-contiguity and the type before taking it, so a refused capsule stays the
    producer's."""
    dl = head(capsule)
    ndim = int(dl.ndim)
    shape = tuple(int(dl.shape[i]) for i in range(ndim))
    if dl.strides:
        expect = 1
        for i in range(ndim - 1, -1, -1):
            if shape[i] != 1 and int(dl.strides[i]) != expect:
                raise TritonModelException(NOT_CONTIGUOUS)
            expect *= shape[i]
    dt = dl.dtype
    code = _TO_TRITON.get((int(dt.code), int(dt.bits))) if int(dt.lanes) == 1 else None
    if code is None:
        raise TritonModelException(
            f"DLPack data type (code {dt.code}, {dt.bits} bits, {dt.lanes} lanes) is not "
            "supported by Python backend."
        )
    count = 1
    for d in shape:
        count *= d
    nbytes = count * (int(dt.bits) // 8)
    ptr = int(dl.data or 0) + int(dl.byte_offset)
    device = (int(dl.device.device_type), int(dl.device.device_id))
    address = _get_pointer(capsule, _DLTENSOR)
    managed = ctypes.cast(address, ctypes.POINTER(DLManagedTensor))
    _set_name(capsule, _USED)  # ours now: the capsule's destructor skips it

    def release() -> None:
        deleter = managed.contents.deleter
        if deleter:
            deleter(managed)

    return DeviceBuffer(ptr, nbytes, device[0], device[1], managed, release), code, shape


# Exported capsules not yet consumed or destroyed: address of the DLManagedTensor -> what
# must live as long as it (the ctypes structures and the tensor they view).
_EXPORTED: Dict[int, Tuple[Any, ...]] = {}
_EXPORTED_LOCK = threading.Lock()


def _deleter(managed: Any) -> None:
    # The entry is dropped outside the lock: dropping it may release the tensor, whose
    # memory may itself come from one of our capsules (this function again).
    with _EXPORTED_LOCK:
        entry = _EXPORTED.pop(ctypes.addressof(managed.contents), None)
    del entry


def _capsule_destructor(capsule: int) -> None:
    # Unconsumed (still 'dltensor'): nobody took ownership, so we delete it ourselves.
    if _raw_is_valid(capsule, _DLTENSOR):
        addr = _raw_get_pointer(capsule, _DLTENSOR)
        with _EXPORTED_LOCK:
            entry = _EXPORTED.pop(addr, None)
        del entry


_DELETER = DELETER(_deleter)
_DESTRUCTOR = _CAPSULE_DESTRUCTOR(_capsule_destructor)


def export(keep: Any, buf: DeviceBuffer, code: int, shape: Tuple[int, ...]) -> Any:
    """A ``dltensor`` capsule over ``buf`` (C-order); ``keep`` (the Tensor) lives until the
    consumer calls the deleter or the unconsumed capsule is destroyed."""
    dl_type = _FROM_TRITON.get(code)
    if dl_type is None:
        raise TritonModelException("DLPack does not have support for string tensors.")
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    # Explicit C-order strides: DLPack 0.8 allows NULL, but not every consumer takes it.
    strides = [1] * ndim
    for i in range(ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides)
    managed = DLManagedTensor()
    t = managed.dl_tensor
    t.data = buf.ptr
    t.device = DLDevice(buf.device_type, buf.device_id)
    t.ndim = ndim
    t.dtype = DLDataType(dl_type[0], dl_type[1], 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _DELETER
    addr = ctypes.addressof(managed)
    with _EXPORTED_LOCK:
        _EXPORTED[addr] = (managed, shape_arr, strides_arr, keep)
    return _new_capsule(addr, _DLTENSOR, _DESTRUCTOR)


def exported_count() -> int:
    """Capsules made by :func:`export` still alive (for tests)."""
    return len(_EXPORTED)


def device_of(obj: Any) -> Optional[Tuple[int, int]]:
    """``obj.__dlpack_device__()`` as ints, or None when ``obj`` has no such method."""
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None:
        return None
    dev = fn()
    return int(dev[0]), int(dev[1])
