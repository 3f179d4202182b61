"""``pb_utils.Tensor``: a named array in host memory (a numpy array, or bytes for BYTES) or
in GPU memory (a :class:`dlpack.DeviceBuffer`, reached through DLPack only)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import dlpack, dtypes, gpu_trace
from . import transport as _transport
from .arguments import as_string, refuse
from .bytes_codec import decode_object_array, serialize_to_bytes
from .dlpack import KDL_BFLOAT, KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_UINT, DeviceBuffer
from .errors import TritonModelException

_NOT_CONTIGUOUS = dlpack.NOT_CONTIGUOUS
# The original's text, then what to do instead (UV-27).
GPU_AS_NUMPY = (
    "Tensor is stored in GPU and cannot be converted to NumPy. Use torch.from_dlpack(tensor) "
    "or cupy.from_dlpack(tensor) (zero-copy, on the GPU), or copy it to the host there "
    "(e.g. torch.from_dlpack(tensor).cpu().numpy()); inputs arrive in host memory while the "
    'model parameter FORCE_CPU_ONLY_INPUT_TENSORS is "yes" (the default).'
)
_BFLOAT16: List[Any] = []


def _bfloat16() -> Any:
    """``ml_dtypes.bfloat16`` when ml_dtypes is installed (UV-39), else None."""
    if not _BFLOAT16:
        try:
            import ml_dtypes

            _BFLOAT16.append(np.dtype(ml_dtypes.bfloat16))
        except ImportError:
            _BFLOAT16.append(None)
    return _BFLOAT16[0]


def _empty_dtype(name: str, dtype: Any) -> Tuple[np.dtype, int]:
    """(little-endian dtype, Triton code) for ``Tensor.empty``, or the error it raises."""
    dt = np.dtype(dtype)
    if dt.kind in "OSU":
        raise TritonModelException(
            f"Tensor.empty('{name}') cannot allocate a BYTES tensor ({dt}): its size is "
            "known only once serialized. Build it with pb_utils.Tensor(name, array)."
        )
    code = dtypes.code_of_array(np.empty(0, dt))
    if code is None:
        raise TritonModelException("NumPy dtype is not supported.")
    if dt.byteorder == ">":
        dt = dt.newbyteorder("<")
    return dt, code


# dtype argument as given (np.float32, "float32", a dtype...) -> what _empty_dtype made of it
_EMPTY_DTYPES: Dict[Any, Tuple[np.dtype, int]] = {}


def _check_device(device: Tuple[int, int]) -> None:
    dev_type = int(device[0])
    if dev_type not in (KDL_CPU, KDL_CUDA_HOST, KDL_CUDA):
        raise TritonModelException(f"DLDevice type {dev_type} is not support by Python backend.")


def _gpu_capsule(obj: Any, device_id: int) -> Any:
    """``obj.__dlpack__`` for a CUDA producer, its work complete: the producer orders it
    before the stream we hand it (our proxy stream, spec §6.4, or the legacy default stream:
    cuda_driver.DLPACK_STREAM_ENV), which we then wait for."""
    from . import cuda_driver

    drv = cuda_driver.driver()
    stream = cuda_driver.handoff_stream(drv, device_id)
    if gpu_trace.ON:
        t0 = gpu_trace.now()
    # The producer's own exception reaches the model unchanged, as in the original (torch's
    # BufferError for a tensor that requires grad is what a model would catch).
    capsule = obj.__dlpack__(stream=stream)
    if gpu_trace.ON:
        t1 = gpu_trace.now()
        gpu_trace.record("from_dlpack.export", t0, t1)
    drv.sync_stream(device_id, stream)
    if gpu_trace.ON:
        gpu_trace.record("from_dlpack.sync", t1)
    return capsule


def _from_gpu_capsule(cls: Any, name: str, capsule: Any, synced: bool) -> "Tensor":
    """A tensor over the device memory of ``capsule`` (consumed; the producer's memory
    lives as long as the tensor). ``synced``: the producer's work is known complete; a
    bare capsule names no stream, so the whole device is waited for."""
    dl = dlpack.head(capsule)
    if not synced:
        from . import cuda_driver

        cuda_driver.driver().synchronize(int(dl.device.device_id))
    if gpu_trace.ON:
        t0 = gpu_trace.now()
    buf, code, shape = dlpack.take(capsule)
    tensor = cls._on_device(name, code, shape, buf)
    if gpu_trace.ON:
        gpu_trace.record("from_dlpack.take", t0)
    return tensor


class _OwnedView(np.ndarray):
    """A view of a Tensor's array that also holds the Tensor (``owner``): the capsule
    exported from it keeps the Tensor alive until the consumer releases it, as the
    original's capsule does (one reference; NVIDIA's qa decoupled_bls counts it)."""

    owner: Any


def _export(arr: np.ndarray, owner: Any) -> Any:
    """A legacy ``dltensor`` capsule for a CPU array of ``owner``; the capsule keeps both
    alive."""
    view = arr.view(_OwnedView)
    view.owner = owner
    try:
        return view.__dlpack__()
    except BufferError:
        # numpy refuses to export read-only arrays; hand out a private copy instead.
        view = arr.copy().view(_OwnedView)
        view.owner = owner
        return view.__dlpack__()


class Tensor:
    """``Tensor(name, array)``. Also built by the stub around shared memory: then
    ``as_numpy()`` is a zero-copy, writable view of that memory."""

    __slots__ = ("_name", "_dtype", "_shape", "_array", "_raw", "__weakref__")

    def __init__(self, name: str, array: Any, /) -> None:
        # Positional only, as the original's binding (which names no arguments).
        if type(name) is not str:  # inline fast path: this constructor is on the hot path
            name = as_string(name, "Tensor", "name")
        if not isinstance(array, np.ndarray):
            # Like the original (pybind11 py::array): no implicit conversion of lists.
            raise refuse("Tensor", "array", "a numpy.ndarray", array)
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        if type(array) is not np.ndarray and isinstance(array, np.ma.MaskedArray):
            # The original fails on it too, with an AttributeError (its binding reads a flag
            # a masked array lacks): the same type here, with a text that says why, since
            # sending its data would drop the mask without a word.
            raise AttributeError(
                f"Tensor '{name}': a numpy masked array cannot be sent, its mask would be "
                "lost. Pass array.filled(<value>) (or array.data) instead."
            )
        code = dtypes.code_of_array(array)
        if code is None:
            raise TritonModelException("NumPy dtype is not supported.")
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        self._name = name
        self._dtype = code
        self._shape = array.shape
        if code == dtypes.TYPE_BYTES:
            self._raw: Any = serialize_to_bytes(array)
        elif code == dtypes.TYPE_BF16:
            self._raw = array.view(np.uint16)  # ml_dtypes.bfloat16: the bits that travel
        else:
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            self._raw = None
        self._array: Optional[np.ndarray] = array

    # -------------------------------------------------------------- construction

    @classmethod
    def empty(cls, name: str, shape: Any, dtype: Any) -> "Tensor":
        """pybackend extension (UV-12): a tensor over uninitialised memory that already
        lives in the shared memory the backend reads outputs from. Fill
        ``tensor.as_numpy()`` in place (``out=`` of numpy functions, slice assignment)
        and return the tensor in an ``InferenceResponse``: the stub copies nothing, the
        backend copies it once into Triton's output buffer. Outside a model instance it
        is ordinary process memory. BYTES tensors cannot be allocated this way."""
        name = as_string(name, "Tensor.empty", "name")
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        # Checks by dtype are done once per dtype: this call is on the hot path of every
        # model that uses it, and numpy calls cost µs each.
        try:
            checked = _EMPTY_DTYPES.get(dtype)
        except TypeError:  # an unhashable dtype spec (a list of fields): not cached
            checked = _empty_dtype(name, dtype)
        if checked is None:
            checked = _empty_dtype(name, dtype)
            if len(_EMPTY_DTYPES) < 256:
                _EMPTY_DTYPES[dtype] = checked
        dt, code = checked
        if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
            dims = shape
        else:
            dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
            if any(d < 0 for d in dims):
                raise TritonModelException(
                    f"Tensor.empty('{name}'): shape {list(dims)} has a negative dimension"
                )
        array = _transport._current.empty_array(dims, dt)
        t = cls.__new__(cls)  # what Tensor(name, array) would check holds by construction
        t._name = name
        t._dtype = code
        t._shape = array.shape
        t._raw = array.view(np.uint16) if code == dtypes.TYPE_BF16 else None
        t._array = array
        return t

    @classmethod
    def _from_buffer(
        cls, name: str, dtype: int, shape: Tuple[int, ...], buf: Union[np.ndarray, memoryview]
    ) -> "Tensor":
        """A tensor over ``buf``: a uint8 array viewing shared memory, or a writable
        memoryview of received bytes (a tensor inline in a message, at least one byte)."""
        t = cls.__new__(cls)
        t._name = name
        t._dtype = dtype
        t._shape = tuple(shape)
        wire = dtypes.WIRE_DTYPE.get(dtype)
        if wire is not None:
            n = 1
            for d in shape:
                n *= d
            if n * wire.itemsize != buf.nbytes:
                raise TritonModelException(
                    f"tensor '{name}': {buf.nbytes} bytes do not hold shape {list(shape)} of "
                    f"{dtypes.CODE_TO_KSERVE_NAME.get(dtype, dtype)}"
                )
            # Received bytes are read as the wire type at once: one numpy call less per
            # input than a uint8 array and its view (the stub's hot path).
            array = (
                buf.view(wire) if isinstance(buf, np.ndarray) else np.frombuffer(buf, wire)
            ).reshape(shape)
            if not array.flags.aligned:
                # A tensor inline in a message starts wherever its name and shape end; model
                # code (and numpy's fast loops, torch, C extensions) expects what the
                # original's shared memory gives: elements at aligned addresses.
                array = array.copy()
            if dtype == dtypes.TYPE_BF16:
                t._array = None
                t._raw = array
            else:
                t._array = array
                t._raw = None
        else:
            t._array = None
            t._raw = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, np.uint8)
        return t

    @classmethod
    def _on_device(
        cls, name: str, dtype: int, shape: Tuple[int, ...], buf: DeviceBuffer
    ) -> "Tensor":
        """A tensor over device memory (a GPU input the backend shared with us)."""
        t = cls.__new__(cls)
        t._name = name
        t._dtype = dtype
        t._shape = tuple(shape)
        t._array = None
        t._raw = buf
        return t

    @classmethod
    def from_dlpack(cls, name: str, dlpack: Any, /) -> "Tensor":
        """Wrap a DLPack capsule or an object with ``__dlpack__``/``__dlpack_device__``
        (zero-copy for C-contiguous CPU tensors; BF16 included)."""
        name = as_string(name, "from_dlpack", "name")
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        if isinstance(dlpack, Tensor):
            # The shortcut for what the original does through the tensor's __dlpack__,
            # which refuses BYTES.
            dlpack._refuse_bytes_export()
            return dlpack._renamed(name)
        if isinstance(dlpack, np.ndarray) and dlpack.dtype.name == "bfloat16":
            if not dlpack.flags.c_contiguous:
                raise TritonModelException(_NOT_CONTIGUOUS)
            return cls(name, dlpack)
        synced = False
        if _is_capsule(dlpack):
            capsule = dlpack
        elif hasattr(dlpack, "__dlpack__") and hasattr(dlpack, "__dlpack_device__"):
            dev = dlpack.__dlpack_device__()
            device = (int(dev[0]), int(dev[1]))
            _check_device(device)
            if device[0] == KDL_CUDA:
                capsule = _gpu_capsule(dlpack, device[1])
                synced = True
            else:
                # A producer's own exception (torch's BufferError for a tensor that
                # requires grad, numpy's for a read-only array) reaches the model
                # unchanged, as in the original.
                try:
                    capsule = dlpack.__dlpack__(stream=None)
                except TypeError:  # a producer whose __dlpack__ takes no stream
                    capsule = dlpack.__dlpack__()
        else:
            raise TritonModelException(
                "Provided tensor is not supported. Tensor must be a DLPack capsule or have "
                "`__dlpack__` and `__dlpack_device__` attributes"
            )
        head = _dl_tensor(capsule)
        device = (head.device.device_type, head.device.device_id)
        _check_device(device)
        if device[0] == KDL_CUDA:
            return _from_gpu_capsule(cls, name, capsule, synced)
        dt = head.dtype
        bf16 = dt.code == KDL_BFLOAT and dt.bits == 16 and dt.lanes == 1
        if bf16:
            # numpy cannot import bfloat16: take the bits as uint16 (same layout) and keep
            # the Triton type. The struct is the producer's, unconsumed, so this is safe.
            dt.code = KDL_UINT
        try:
            array = np.from_dlpack(_CapsuleHolder(capsule, device))
        except (TypeError, BufferError, RuntimeError, ValueError) as e:
            raise TritonModelException(f"DLPack tensor could not be imported: {e}") from None
        if not array.flags.c_contiguous:
            raise TritonModelException(_NOT_CONTIGUOUS)
        if bf16:
            t = cls.__new__(cls)
            t._name = name
            t._dtype = dtypes.TYPE_BF16
            t._shape = array.shape
            t._raw = array
            t._array = None
            return t
        if dtypes.code_of_array(array) in (None, dtypes.TYPE_BYTES):
            # The original's text, then which type it was.
            raise TritonModelException(
                f"Dtype is invalid. DLPack data type {array.dtype} is not supported by "
                "Python backend."
            )
        return cls(name, array)

    def _refuse_bytes_export(self) -> None:
        if self._dtype == dtypes.TYPE_BYTES:
            raise TritonModelException("DLPack does not have support for string tensors.")

    def _renamed(self, name: str) -> "Tensor":
        """The same data under another name (no copy)."""
        t = Tensor.__new__(Tensor)
        t._name = name
        t._dtype = self._dtype
        t._shape = self._shape
        t._raw = self._raw
        t._array = self._array
        return t

    # -------------------------------------------------------------- accessors

    def name(self) -> str:
        return self._name

    def shape(self) -> List[int]:
        return list(self._shape)

    def triton_dtype(self) -> int:
        """The ``TRITONSERVER_DataType`` code (upstream raises TypeError here)."""
        return self._dtype

    def is_cpu(self) -> bool:
        return type(self._raw) is not DeviceBuffer

    def as_numpy(self) -> np.ndarray:
        arr = self._array
        if arr is not None:
            return arr
        if type(self._raw) is DeviceBuffer:
            raise TritonModelException(GPU_AS_NUMPY)
        if self._dtype == dtypes.TYPE_BF16:
            bfloat16 = _bfloat16()
            if bfloat16 is None:
                raise TritonModelException(
                    "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and "
                    "from_dlpack() instead (or install ml_dtypes in the model's Python "
                    "environment to get an ml_dtypes.bfloat16 array)."
                )
            arr = self._raw.view(np.uint16).view(bfloat16).reshape(self._shape)
            self._array = arr
            return arr
        # BYTES from the wire: materialise once, keep the result.
        count = 1
        for d in self._shape:
            count *= d
        arr = decode_object_array(self._raw, count).reshape(self._shape)
        self._array = arr
        return arr

    def _host_copy(self) -> np.ndarray:
        """What a client receives for this tensor: ``as_numpy()``, or for a GPU tensor a host
        copy of it (the offline harness's view of a GPU output; needs the GPU's driver)."""
        raw = self._raw
        if type(raw) is not DeviceBuffer:
            return self.as_numpy()
        from . import cuda_driver

        wire = dtypes.WIRE_DTYPE[self._dtype]
        host = np.empty(self._shape, wire)
        if raw.nbytes:
            cuda_driver.driver().copy_to_host(raw.device_id, host.ctypes.data, raw.ptr, raw.nbytes)
        if self._dtype == dtypes.TYPE_BF16 and _bfloat16() is not None:
            return host.view(_bfloat16())
        return host

    def to_dlpack(self) -> Any:
        self._refuse_bytes_export()
        if type(self._raw) is DeviceBuffer:
            if gpu_trace.ON:
                t0 = gpu_trace.now()
            capsule = dlpack.export(self, self._raw, self._dtype, self._shape)
            if gpu_trace.ON:
                gpu_trace.record("to_dlpack", t0)
            return capsule
        if self._dtype == dtypes.TYPE_BF16:
            bits = self._raw.view(np.uint16).reshape(self._shape)
            capsule = _export(bits, self)
            _dl_tensor(capsule).dtype.code = KDL_BFLOAT  # uint16 bits, announced as bfloat16
            return capsule
        return _export(self.as_numpy(), self)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        # A GPU tensor of ours has no pending work (it was synchronized when it was made,
        # or is an input the backend finished writing): the consumer's stream needs no wait.
        return self.to_dlpack()

    def __dlpack_device__(self) -> Tuple[int, int]:
        raw = self._raw
        if type(raw) is DeviceBuffer:
            return (raw.device_type, raw.device_id)
        return (KDL_CPU, 0)

    # -------------------------------------------------------------- internals

    def _wire_bytes(self) -> Any:
        """The bytes that travel for this tensor: the array itself (numeric) or the
        serialized BYTES buffer."""
        return self._raw if self._raw is not None else self._array

    @property
    def _nbytes(self) -> int:
        raw = self._raw
        if raw is not None:
            return raw.nbytes if isinstance(raw, (np.ndarray, DeviceBuffer)) else len(raw)
        return self._array.nbytes  # type: ignore[union-attr]

    def __repr__(self) -> str:
        kind = dtypes.CODE_TO_KSERVE_NAME.get(self._dtype)
        where = "" if self.is_cpu() else f", gpu {self._raw.device_id}"  # type: ignore[union-attr]
        return f"Tensor({self._name!r}, {kind}, shape={list(self._shape)}{where})"


# ------------------------------------------------------------------ DLPack capsules


_is_capsule = dlpack.is_capsule
_dl_tensor = dlpack.head


class _CapsuleHolder:
    """Lets ``np.from_dlpack`` consume a bare capsule."""

    def __init__(self, capsule: Any, device: Tuple[int, int]) -> None:
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._device
