"""TensorDesc (docs/protocol.md, "TensorDesc"): one tensor on the wire, inline, in an
arena, or as a GPU_IPC reference, and its writer and reader."""

from __future__ import annotations

import struct
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple, Union

from .primitives import (
    BLOCK_REF,
    GPU_REF,
    TENSOR_HEAD,
    U32,
    U64,
    Buffer,
    ProtocolError,
    Reader,
    put_str,
)
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
    try:
        t, r.pos = tensor_at(r.buf, r.pos, r.end)
    except (struct.error, IndexError):
        raise truncated(r.pos, r.end) from None
    return t


# ------------------------------------------------------------------ flat reading (hot path)
# The decoders of the messages a stub reads per request (EXECUTE, BLS_RESPONSE) walk the body
# with plain offsets instead of a Reader: a method call per field costs more than the field.
# The caller turns struct.error and IndexError (a truncated body) into ProtocolError.

STR_LEN = U32.unpack_from
_TENSOR_TAIL_CACHE: dict = {}


def truncated(pos: int, end: int) -> ProtocolError:
    return ProtocolError(f"body truncated at offset {pos} of {end}")


def _tensor_tail(ndim: int) -> struct.Struct:
    """``u8 dtype, u8 location, u32 ndim`` is read first; then dims and byte_size at once."""
    s = _TENSOR_TAIL_CACHE.get(ndim)
    if s is None:
        if ndim > 64:
            raise ProtocolError(f"tensor rank {ndim} is larger than 64")
        s = _TENSOR_TAIL_CACHE[ndim] = struct.Struct(f"<{ndim}qQ")
    return s


def str_at(mv: memoryview, pos: int, end: int) -> Tuple[str, int]:
    """The ``str`` at ``pos`` and the offset after it."""
    (n,) = STR_LEN(mv, pos)
    pos += 4
    e = pos + n
    if e > end:
        raise truncated(pos, end)
    return str(mv[pos:e], "utf-8", "surrogateescape"), e


def tensor_at(
    mv: memoryview, pos: int, end: int, make: Callable[..., Any] = TensorDesc
) -> Tuple[Any, int]:
    """The TensorDesc at ``pos`` (INLINE data a view of ``mv``) and the offset after it.
    ``make(name, dtype, location, dims, byte_size, seg, offset, data)`` builds it
    (default: TensorDesc)."""
    name, pos = str_at(mv, pos, end)
    dtype, loc, ndim = TENSOR_HEAD.unpack_from(mv, pos)
    pos += 6
    tail = _tensor_tail(ndim)
    vals = tail.unpack_from(mv, pos)
    pos += tail.size
    byte_size = vals[-1]
    dims = vals[:-1]
    if loc == 0:  # Location.INLINE
        e = pos + byte_size
        if e > end:
            raise truncated(pos, end)
        return make(name, dtype, loc, dims, byte_size, 0, 0, mv[pos:e]), e
    if loc == 1 or loc == 2:  # BACKEND_ARENA / STUB_ARENA
        seg, off = BLOCK_REF.unpack_from(mv, pos)
        return make(name, dtype, loc, dims, byte_size, seg, off, None), pos + 12
    if loc == 3:  # GPU_IPC
        if pos + GPU_REF.size > end:
            raise truncated(pos, end)
        ref = GpuRef(*GPU_REF.unpack_from(mv, pos))
        return make(name, dtype, loc, dims, byte_size, 0, 0, ref), pos + GPU_REF.size
    raise ProtocolError(
        f"tensor '{name}': location {loc} is not supported in protocol version {PROTOCOL_VERSION}"
    )
