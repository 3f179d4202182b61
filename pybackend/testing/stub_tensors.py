"""Tensors between numpy and a stub process, on the backend's side: an input as the
backend sends it (inline, or in its arena), and what the stub sent (outputs, BLS inputs)
as numpy arrays, a response as a dict, a GPU output copied to the host."""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..ipc.arena import Arena
from ..ipc.codec import ResponseDesc, TensorDesc
from ..ipc.protocol import Location, Owner
from ..utils import dtypes
from ..utils.bytes_codec import serialize_to_bytes, split_bytes, to_object_array
from ..utils.tensor import _bfloat16


def input_desc(
    arena: Arena, name: str, value: np.ndarray, in_arena: Optional[bool], inline_threshold: int
) -> TensorDesc:
    """The input ``name`` as the backend sends it: in ``arena`` (when ``in_arena``, or, when
    that is None, when it is larger than ``inline_threshold``), else inline."""
    code = dtypes.code_of_array(value)
    assert code is not None
    raw = (
        serialize_to_bytes(value)
        if code == dtypes.TYPE_BYTES
        else np.ascontiguousarray(value).tobytes()
    )
    use_arena = len(raw) > inline_threshold if in_arena is None else in_arena
    if use_arena:
        seg, off = arena.alloc(len(raw))
        if raw:
            arena.write(seg, off, memoryview(raw))
        return TensorDesc(name, code, Location.BACKEND_ARENA, value.shape, len(raw), seg, off)
    return TensorDesc(name, code, Location.INLINE, value.shape, len(raw), data=raw)


def wire_array(raw: bytes, dtype: int, dims: Sequence[int]) -> np.ndarray:
    """A tensor's bytes as the stub sent them, as a numpy array of its own."""
    if dtype == dtypes.TYPE_BYTES:
        return to_object_array(split_bytes(raw)).reshape(dims)
    array = np.frombuffer(raw, dtypes.WIRE_DTYPE[dtype]).reshape(dims).copy()
    if dtype == dtypes.TYPE_BF16 and _bfloat16() is not None:
        return array.view(_bfloat16())  # as as_numpy() gives BF16 (UV-39)
    return array


def response_dict(
    resp: ResponseDesc, array_of: Callable[[TensorDesc], np.ndarray]
) -> Dict[str, Any]:
    """A response the stub sent, its outputs read by ``array_of``."""
    out: Dict[str, Any] = {
        "error": resp.error,
        "fails": resp.fails,
        "parameters": resp.parameters,
        "outputs": {},
        "where": {},
    }
    for td in resp.outputs:
        out["outputs"][td.name] = array_of(td)
        out["where"][td.name] = td.location
    return out


class GpuCopies:
    """GPU outputs of the stub's, copied to the host as the backend does when Triton hands
    out host memory: each allocation mapped through CUDA IPC once (docs/gpu.md). Needs a
    GPU, like the model."""

    def __init__(self) -> None:
        self._maps: Dict[Tuple[int, bytes], int] = {}  # the stub's GPU allocations mapped here

    def copy(self, td: TensorDesc) -> bytes:
        from ..utils import cuda_driver

        ref: Any = td.data
        if ref.owner != Owner.STUB:
            raise AssertionError(f"{td}: the offline harness shares no GPU memory with the stub")
        drv = cuda_driver.driver()
        key = (ref.device, bytes(ref.handle))
        base = self._maps.get(key)
        if base is None:
            base = self._maps[key] = drv.open_ipc(ref.device, key[1])
        out = bytearray(td.byte_size)
        if td.byte_size:
            view = (ctypes.c_char * td.byte_size).from_buffer(out)
            drv.copy_to_host(ref.device, ctypes.addressof(view), base + ref.offset, td.byte_size)
            del view
        return bytes(out)
