"""TensorDesc (docs/protocol.md, "TensorDesc"): one tensor on the wire, inline, in an
arena, or as a GPU_IPC reference, and its writer and reader."""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional, Sequence, Union

from .primitives import BLOCK_REF, GPU_REF, TENSOR_HEAD, U64, Buffer, ProtocolError, Reader, put_str
from .protocol import PROTOCOL_VERSION, Location

_DIMS_CACHE: dict = {}


def _dims_struct(ndim: int) -> struct.Struct:
    s = _DIMS_CACHE.get(ndim)
    if s is None:
        if ndim > 64:
            raise ProtocolError(f"tensor rank {ndim} is larger than 64")
        s = _DIMS_CACHE[ndim] = struct.Struct(f"<{ndim}q")
    return s


class GpuRef(NamedTuple):
    """Where a GPU_IPC tensor lies: ``offset`` bytes into the device allocation that
    ``handle`` (a CUipcMemHandle) names on ``device`` (the backend's numbering). ``owner``
    keeps the memory alive until the peer returns the BlockRef (GPU_HOLD_SEG, ``hold``)."""

    owner: int
    device: int
    hold: int
    handle: bytes
    offset: int


class TensorDesc:
    """One tensor on the wire. ``data`` holds the bytes of an INLINE tensor and the
    :class:`GpuRef` of a GPU_IPC one; arena tensors carry ``seg``/``offset`` instead (the
    bytes live in that arena)."""

    __slots__ = ("name", "dtype", "location", "dims", "byte_size", "seg", "offset", "data")

    def __init__(
        self,
        name: str,
        dtype: int,
        location: int,
        dims: Sequence[int],
        byte_size: int,
        seg: int = 0,
        offset: int = 0,
        data: Optional[Union[Buffer, "GpuRef"]] = None,
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.location = location
        self.dims = dims if type(dims) is tuple else tuple(dims)
        self.byte_size = byte_size
        self.seg = seg
        self.offset = offset
        self.data = data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorDesc):
            return NotImplemented
        return (
            self.name == other.name
            and self.dtype == other.dtype
            and self.location == other.location
            and self.dims == other.dims
            and self.byte_size == other.byte_size
            and (
                self.location == Location.INLINE
                or (self.seg, self.offset) == (other.seg, other.offset)
            )
            and (
                self.location != Location.INLINE
                or bytes(self.data or b"") == bytes(other.data or b"")  # type: ignore[arg-type]
            )
            and (self.location != Location.GPU_IPC or self.data == other.data)
        )

    def __repr__(self) -> str:
        if self.location == Location.INLINE:
            where = "inline"
        elif self.location == Location.GPU_IPC:
            ref = self.data
            where = f"gpu {ref.device} hold {ref.hold} +{ref.offset}"  # type: ignore[union-attr]
        else:
            where = f"{self.location}:{self.seg}+{self.offset}"
        return (
            f"TensorDesc({self.name!r}, dtype={self.dtype}, dims={self.dims}, "
            f"{self.byte_size}B, {where})"
        )


def put_tensor(out: bytearray, t: TensorDesc) -> None:
    put_str(out, t.name)
    dims = t.dims
    out += TENSOR_HEAD.pack(t.dtype, t.location, len(dims))
    if dims:
        out += _dims_struct(len(dims)).pack(*dims)
    out += U64.pack(t.byte_size)
    loc = t.location
    if loc == Location.INLINE:
        data = t.data if t.data is not None else b""
        n = data.nbytes if isinstance(data, memoryview) else len(data)
        if n != t.byte_size:
            raise ProtocolError(
                f"inline tensor '{t.name}' has {n} bytes but byte_size {t.byte_size}"
            )
        out += data  # type: ignore[arg-type]
    elif loc == Location.BACKEND_ARENA or loc == Location.STUB_ARENA:
        out += BLOCK_REF.pack(t.seg, t.offset)
    elif loc == Location.GPU_IPC:
        out += GPU_REF.pack(*t.data)  # type: ignore[misc]
    else:
        raise ProtocolError(
            f"tensor '{t.name}': location {loc} is not supported in protocol version "
            f"{PROTOCOL_VERSION}"
        )


def read_tensor(r: Reader) -> TensorDesc:
    name = r.str()
    dtype, loc, ndim = r.unpack(TENSOR_HEAD)
    dims = r.unpack(_dims_struct(ndim)) if ndim else ()
    (byte_size,) = r.unpack(U64)
    if loc == Location.INLINE:
        return TensorDesc(name, dtype, loc, dims, byte_size, data=r.bytes_view(byte_size))
    if loc == Location.BACKEND_ARENA or loc == Location.STUB_ARENA:
        seg, off = r.unpack(BLOCK_REF)
        return TensorDesc(name, dtype, loc, dims, byte_size, seg, off)
    if loc == Location.GPU_IPC:
        return TensorDesc(name, dtype, loc, dims, byte_size, data=GpuRef(*r.unpack(GPU_REF)))
    raise ProtocolError(
        f"tensor '{name}': location {loc} is not supported in protocol version {PROTOCOL_VERSION}"
    )
