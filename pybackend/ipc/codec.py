"""Encoding and decoding of message bodies (docs/protocol.md, "Primitive encodings" onward).

Every layout is a precompiled ``struct.Struct``; decoding walks a ``memoryview`` with an
offset so inline tensor payloads come out as zero-copy slices of the received buffer.
Truncated or inconsistent input raises :class:`ProtocolError`, never an IndexError.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..errors import PybackendError
from .protocol import PROTOCOL_VERSION, Location, ResultKind, ResultStatus

U8 = struct.Struct("<B")
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")
F64 = struct.Struct("<d")
BLOCK_REF = struct.Struct("<IQ")  # u32 seg, u64 offset
INDIRECT = struct.Struct("<IQQ")  # u32 seg, u64 offset, u64 length
TENSOR_HEAD = struct.Struct("<BBI")  # u8 dtype, u8 location, u32 ndim
REQUEST_HEAD = struct.Struct("<Q")
FLAGS_TIMEOUT = struct.Struct("<IQ")  # u32 flags, u64 timeout_us
HELLO_HEAD = struct.Struct("<II")
LOG_HEAD = struct.Struct("<BI")
SEND_HEAD = struct.Struct("<QIB")
SEGMENT_ADD = struct.Struct("<BIQ")
SEGMENT_DROP = struct.Struct("<BI")
FREE_HEAD = struct.Struct("<BI")
RESULT_OK_HEAD = struct.Struct("<BII")  # status, async_seq, n
SEQ_N = struct.Struct("<II")
PER_RESULT = struct.Struct("<BI")  # kind, release_flags
ERROR_HEAD = struct.Struct("<I")
# GPU_IPC tensors: u8 owner, u32 device_id, u64 hold, 64-byte CUipcMemHandle, u64 offset
GPU_REF = struct.Struct("<BIQ64sQ")

_DIMS_CACHE: dict = {}

Buffer = Union[bytes, bytearray, memoryview]


class ProtocolError(PybackendError):
    """A peer sent bytes that do not follow docs/protocol.md."""


def _dims_struct(ndim: int) -> struct.Struct:
    s = _DIMS_CACHE.get(ndim)
    if s is None:
        if ndim > 64:
            raise ProtocolError(f"tensor rank {ndim} is larger than 64")
        s = _DIMS_CACHE[ndim] = struct.Struct(f"<{ndim}q")
    return s


# ---------------------------------------------------------------------------- writing


def put_str(out: bytearray, s: str) -> None:
    b = s.encode("utf-8", "surrogateescape")
    out += U32.pack(len(b))
    out += b


def put_blob(out: bytearray, b: Buffer) -> None:
    out += U32.pack(len(b) if not isinstance(b, memoryview) else b.nbytes)
    out += b


# ---------------------------------------------------------------------------- reading


class Reader:
    """Cursor over a received body; every read is bounds-checked."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.buf = mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")
        self.pos = pos
        self.end = self.buf.nbytes

    def unpack(self, s: struct.Struct) -> Tuple[Any, ...]:
        pos = self.pos
        if pos + s.size > self.end:
            raise ProtocolError(
                f"body truncated: need {s.size} bytes at offset {pos} of {self.end}"
            )
        self.pos = pos + s.size
        return s.unpack_from(self.buf, pos)

    def u8(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise ProtocolError(f"body truncated: need 1 byte at offset {pos} of {self.end}")
        self.pos = pos + 1
        return self.buf[pos]

    def u32(self) -> int:
        return self.unpack(U32)[0]

    def u64(self) -> int:
        return self.unpack(U64)[0]

    def bytes_view(self, n: int) -> memoryview:
        pos = self.pos
        end = pos + n
        if end > self.end:
            raise ProtocolError(f"body truncated: need {n} bytes at offset {pos} of {self.end}")
        self.pos = end
        return self.buf[pos:end]

    def str(self) -> str:
        n = self.u32()
        return str(self.bytes_view(n), "utf-8", "surrogateescape")

    def blob(self) -> memoryview:
        return self.bytes_view(self.u32())

    def json(self) -> Any:
        text = self.str()
        return json.loads(text) if text else None

    def done(self) -> None:
        if self.pos != self.end:
            raise ProtocolError(f"{self.end - self.pos} unexpected trailing bytes in body")


# ---------------------------------------------------------------------------- tensors


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


# ---------------------------------------------------------------------------- responses


class ResponseDesc:
    """ResponseBody: an error (code, message) or parameters plus output tensors."""

    __slots__ = ("error", "parameters", "outputs")

    def __init__(
        self,
        outputs: Sequence[TensorDesc] = (),
        parameters: str = "",
        error: Optional[Tuple[int, str]] = None,
    ) -> None:
        self.outputs = list(outputs)
        self.parameters = parameters
        self.error = error

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResponseDesc):
            return NotImplemented
        return (self.error, self.parameters, self.outputs) == (
            other.error,
            other.parameters,
            other.outputs,
        )

    def __repr__(self) -> str:
        return (
            f"ResponseDesc(outputs={self.outputs}, parameters={self.parameters!r}, "
            f"error={self.error})"
        )


def put_response(out: bytearray, resp: Union[ResponseDesc, bytes, bytearray]) -> None:
    """``resp`` may also be an already encoded ResponseBody (the stub's Placer writes
    those directly): it is spliced in as it is."""
    if not isinstance(resp, ResponseDesc):
        out += resp
        return
    if resp.error is not None:
        out += b"\x01"
        out += ERROR_HEAD.pack(resp.error[0])
        put_str(out, resp.error[1])
    else:
        out += b"\x00"
    put_str(out, resp.parameters)
    out += U32.pack(len(resp.outputs))
    for t in resp.outputs:
        put_tensor(out, t)


def read_response(r: Reader) -> ResponseDesc:
    error = None
    if r.u8():
        (code,) = r.unpack(ERROR_HEAD)
        error = (code, r.str())
    params = r.str()
    n = r.u32()
    return ResponseDesc([read_tensor(r) for _ in range(n)], params, error)


# ---------------------------------------------------------------------------- execute


class RequestDesc:
    """One request of an EXECUTE body."""

    __slots__ = (
        "token",
        "request_id",
        "correlation_id",
        "flags",
        "timeout_us",
        "parameters",
        "requested_outputs",
        "inputs",
    )

    def __init__(
        self,
        token: int,
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        flags: int = 0,
        timeout_us: int = 0,
        parameters: str = "{}",
        requested_outputs: Sequence[str] = (),
        inputs: Sequence[TensorDesc] = (),
    ) -> None:
        self.token = token
        self.request_id = request_id
        self.correlation_id = correlation_id
        self.flags = flags
        self.timeout_us = timeout_us
        self.parameters = parameters
        self.requested_outputs = (
            requested_outputs if type(requested_outputs) is list else list(requested_outputs)
        )
        self.inputs = inputs if type(inputs) is list else list(inputs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestDesc):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return f"RequestDesc(token={self.token}, id={self.request_id!r}, inputs={self.inputs})"


def encode_execute(
    requests: Sequence[RequestDesc], freed: Sequence[Tuple[int, int]] = ()
) -> bytearray:
    """ExecuteBody; ``freed``: stub blocks (seg, offset) the backend hands back with it (the
    optional trailer, what a FREE of owner STUB carries)."""
    out = bytearray(U32.pack(len(requests)))
    for q in requests:
        out += REQUEST_HEAD.pack(q.token)
        put_str(out, q.request_id)
        put_correlation_id(out, q.correlation_id)
        out += FLAGS_TIMEOUT.pack(q.flags, q.timeout_us)
        put_str(out, q.parameters)
        put_outputs_and_inputs(out, q.requested_outputs, q.inputs)
    if freed:
        append_freed(out, freed)
    return out


def put_correlation_id(out: bytearray, cid: Union[int, str]) -> None:
    """u8 kind (0 integer, 1 string), then a u64 or a str: EXECUTE and BLS_EXEC alike."""
    if isinstance(cid, str):
        out += b"\x01"
        put_str(out, cid)
    else:
        out += b"\x00"
        out += U64.pack(cid)


def put_outputs_and_inputs(
    out: bytearray, requested_outputs: Sequence[str], inputs: Sequence[TensorDesc]
) -> None:
    """The requested output names, then the input tensors: EXECUTE and BLS_EXEC alike."""
    out += U32.pack(len(requested_outputs))
    for name in requested_outputs:
        put_str(out, name)
    out += U32.pack(len(inputs))
    for t in inputs:
        put_tensor(out, t)


_STR_LEN = U32.unpack_from
_TOKEN_AND_LEN = struct.Struct("<QI").unpack_from  # token, request_id length
_FLAGS_TIMEOUT_LEN = struct.Struct("<IQI").unpack_from  # flags, timeout, parameters length
_TENSOR_TAIL_CACHE: dict = {}


def _tensor_tail(ndim: int) -> struct.Struct:
    """``u8 dtype, u8 location, u32 ndim`` is read first; then dims and byte_size at once."""
    s = _TENSOR_TAIL_CACHE.get(ndim)
    if s is None:
        if ndim > 64:
            raise ProtocolError(f"tensor rank {ndim} is larger than 64")
        s = _TENSOR_TAIL_CACHE[ndim] = struct.Struct(f"<{ndim}qQ")
    return s


def _truncated(pos: int, end: int) -> ProtocolError:
    return ProtocolError(f"body truncated at offset {pos} of {end}")


def _fast_str(mv: memoryview, pos: int, end: int) -> Tuple[str, int]:
    (n,) = _STR_LEN(mv, pos)
    pos += 4
    e = pos + n
    if e > end:
        raise _truncated(pos, end)
    return str(mv[pos:e], "utf-8", "surrogateescape"), e


def _fast_tensor(
    mv: memoryview, pos: int, end: int, make: Callable[..., Any] = TensorDesc
) -> Tuple[Any, int]:
    name, pos = _fast_str(mv, pos, end)
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
            raise _truncated(pos, end)
        return make(name, dtype, loc, dims, byte_size, 0, 0, mv[pos:e]), e
    if loc == 1 or loc == 2:  # BACKEND_ARENA / STUB_ARENA
        seg, off = BLOCK_REF.unpack_from(mv, pos)
        return make(name, dtype, loc, dims, byte_size, seg, off, None), pos + 12
    if loc == 3:  # GPU_IPC
        if pos + GPU_REF.size > end:
            raise _truncated(pos, end)
        ref = GpuRef(*GPU_REF.unpack_from(mv, pos))
        return make(name, dtype, loc, dims, byte_size, 0, 0, ref), pos + GPU_REF.size
    raise ProtocolError(
        f"tensor '{name}': location {loc} is not supported in protocol version {PROTOCOL_VERSION}"
    )


def decode_execute(
    body: Buffer,
    tensor: Callable[..., Any] = TensorDesc,
    request: Callable[..., Any] = RequestDesc,
    freed: Optional[List[Tuple[int, int]]] = None,
) -> List[Any]:
    """The hot-path decoder: flat offset arithmetic, no per-field method calls.

    ``tensor(name, dtype, location, dims, byte_size, seg, offset, data)`` and
    ``request(token, request_id, correlation_id, flags, timeout_us, parameters,
    requested_outputs, inputs)`` build the results (by default ``TensorDesc`` and
    ``RequestDesc``); the stub passes factories that build its request objects at once.
    The stub blocks of the freed trailer, if any, are appended to ``freed``."""
    mv = body if isinstance(body, memoryview) else memoryview(body)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    end = mv.nbytes
    requests = []
    try:
        (n,) = _STR_LEN(mv, 0)
        pos = 4
        for _ in range(n):
            token, idlen = _TOKEN_AND_LEN(mv, pos)
            pos += 12
            e = pos + idlen
            if e > end:
                raise _truncated(pos, end)
            request_id = str(mv[pos:e], "utf-8", "surrogateescape")
            corr_kind = mv[e]
            pos = e + 1
            if corr_kind == 0:
                (corr,) = U64.unpack_from(mv, pos)
                pos += 8
            elif corr_kind == 1:
                corr, pos = _fast_str(mv, pos, end)
            else:
                raise ProtocolError(f"unknown correlation id kind {corr_kind}")
            flags, timeout, plen = _FLAGS_TIMEOUT_LEN(mv, pos)
            pos += 16
            e = pos + plen
            if e > end:
                raise _truncated(pos, end)
            params = str(mv[pos:e], "utf-8", "surrogateescape")
            (k,) = _STR_LEN(mv, e)
            pos = e + 4
            requested = []
            for _ in range(k):
                name, pos = _fast_str(mv, pos, end)
                requested.append(name)
            (k,) = _STR_LEN(mv, pos)
            pos += 4
            inputs = []
            for _ in range(k):
                t, pos = _fast_tensor(mv, pos, end, tensor)
                inputs.append(t)
            requests.append(
                request(token, request_id, corr, flags, timeout, params, requested, inputs)
            )
        if pos < end:  # the optional freed trailer
            blocks = _read_freed(mv, pos, end)
            if freed is not None:
                freed += blocks
            pos = end
    except (struct.error, IndexError):
        raise ProtocolError(f"EXECUTE body of {end} bytes is truncated") from None
    return requests


def _read_freed(mv: memoryview, pos: int, end: int) -> List[Tuple[int, int]]:
    """The freed trailer (u32 count, then count x (u32 seg, u64 offset)) that ends a body."""
    if end - pos < 4:
        raise ProtocolError(f"{end - pos} unexpected trailing bytes in body")
    (n,) = _STR_LEN(mv, pos)
    pos += 4
    if end - pos != n * BLOCK_REF.size:
        raise ProtocolError(f"freed trailer announces {n} blocks but carries {end - pos} bytes")
    return [BLOCK_REF.unpack_from(mv, pos + i * BLOCK_REF.size) for i in range(n)]


# ---------------------------------------------------------------------------- result


class ResultDesc:
    """ResultBody. ``error`` set means the whole batch failed; otherwise ``items`` is one
    ``(kind, release_flags, ResponseDesc | None)`` per request, and ``freed`` the backend
    blocks (seg, offset) that died with the batch (what a FREE of owner BACKEND carries)."""

    __slots__ = ("error", "async_seq", "items", "freed")

    def __init__(
        self,
        items: Sequence[Tuple[int, int, Optional[ResponseDesc]]] = (),
        async_seq: int = 0,
        error: Optional[Tuple[int, str]] = None,
        freed: Sequence[Tuple[int, int]] = (),
    ) -> None:
        self.items = list(items)
        self.async_seq = async_seq
        self.error = error
        self.freed = list(freed)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResultDesc):
            return NotImplemented
        return (self.error, self.async_seq, self.items, self.freed) == (
            other.error,
            other.async_seq,
            other.items,
            other.freed,
        )

    def __repr__(self) -> str:
        return (
            f"ResultDesc(error={self.error}, async_seq={self.async_seq}, items={self.items}, "
            f"freed={self.freed})"
        )


def encode_result_error(code: int, message: str) -> bytearray:
    out = bytearray(U8.pack(ResultStatus.BATCH_ERROR))
    out += ERROR_HEAD.pack(code)
    put_str(out, message)
    return out


def encode_result(result: ResultDesc) -> bytearray:
    if result.error is not None:
        return encode_result_error(*result.error)
    out = bytearray(RESULT_OK_HEAD.pack(ResultStatus.OK, result.async_seq, len(result.items)))
    for kind, release_flags, resp in result.items:
        out += PER_RESULT.pack(kind, release_flags)
        if kind == ResultKind.RESPONSE:
            put_response(out, resp)  # type: ignore[arg-type]
    if result.freed:
        append_freed(out, result.freed)
    return out


def append_freed(out: bytearray, blocks: Sequence[Tuple[int, int]]) -> None:
    """Append the freed trailer to an encoded ExecuteBody or OK ResultBody: the receiver
    returns the blocks to its arena as a FREE would, without the FREE's socket message."""
    out += U32.pack(len(blocks))
    pack = BLOCK_REF.pack
    for seg, off in blocks:
        out += pack(seg, off)


def decode_result(body: Buffer) -> ResultDesc:
    r = Reader(body)
    status = r.u8()
    if status == ResultStatus.BATCH_ERROR:
        (code,) = r.unpack(ERROR_HEAD)
        res = ResultDesc(error=(code, r.str()))
    elif status == ResultStatus.OK:
        seq, n = r.unpack(SEQ_N)
        items: List[Tuple[int, int, Optional[ResponseDesc]]] = []
        for _ in range(n):
            kind, flags = r.unpack(PER_RESULT)
            if kind == ResultKind.RESPONSE:
                items.append((kind, flags, read_response(r)))
            elif kind == ResultKind.NONE:
                items.append((kind, flags, None))
            else:
                raise ProtocolError(f"unknown result kind {kind}")
        freed: List[Tuple[int, int]] = []
        if r.pos < r.end:  # the optional trailer
            freed = _read_freed(r.buf, r.pos, r.end)
            r.pos = r.end
        res = ResultDesc(items, seq, freed=freed)
    else:
        raise ProtocolError(f"unknown result status {status}")
    r.done()
    return res


# ---------------------------------------------------------------------------- small bodies


def encode_hello(
    protocol_version: int, pid: int, python_version: str, numpy_version: str
) -> bytearray:
    out = bytearray(HELLO_HEAD.pack(protocol_version, pid))
    put_str(out, python_version)
    put_str(out, numpy_version)
    return out


def decode_hello(body: Buffer) -> Tuple[int, int, str, str]:
    r = Reader(body)
    version, pid = r.unpack(HELLO_HEAD)
    py, np_ = r.str(), r.str()
    r.done()
    return version, pid, py, np_


def encode_json(obj: Any) -> bytearray:
    out = bytearray()
    put_str(out, json.dumps(obj))
    return out


def decode_json(body: Buffer) -> Any:
    r = Reader(body)
    v = r.json()
    r.done()
    return v


def encode_log(level: int, line: int, filename: str, message: str) -> bytearray:
    out = bytearray(LOG_HEAD.pack(level, line))
    put_str(out, filename)
    put_str(out, message)
    return out


def decode_log(body: Buffer) -> Tuple[int, int, str, str]:
    r = Reader(body)
    level, line = r.unpack(LOG_HEAD)
    f, m = r.str(), r.str()
    r.done()
    return level, line, f, m


def encode_send(
    token: int, send_flags: int, resp: Union[ResponseDesc, bytes, bytearray, None]
) -> bytearray:
    out = bytearray(SEND_HEAD.pack(token, send_flags, 0 if resp is None else 1))
    if resp is not None:
        put_response(out, resp)
    return out


def decode_send(body: Buffer) -> Tuple[int, int, Optional[ResponseDesc]]:
    r = Reader(body)
    token, flags, has = r.unpack(SEND_HEAD)
    resp = read_response(r) if has else None
    r.done()
    return token, flags, resp


def encode_segment_add(owner: int, seg: int, size: int) -> bytes:
    return SEGMENT_ADD.pack(owner, seg, size)


def decode_segment_add(body: Buffer) -> Tuple[int, int, int]:
    r = Reader(body)
    v = r.unpack(SEGMENT_ADD)
    r.done()
    return v


def encode_segment_drop(owner: int, seg: int) -> bytes:
    return SEGMENT_DROP.pack(owner, seg)


def decode_segment_drop(body: Buffer) -> Tuple[int, int]:
    r = Reader(body)
    v = r.unpack(SEGMENT_DROP)
    r.done()
    return v


def encode_free(owner: int, blocks: Sequence[Tuple[int, int]]) -> bytearray:
    out = bytearray(FREE_HEAD.pack(owner, len(blocks)))
    pack = BLOCK_REF.pack
    for seg, off in blocks:
        out += pack(seg, off)
    return out


def decode_free(body: Buffer) -> Tuple[int, List[Tuple[int, int]]]:
    r = Reader(body)
    owner, n = r.unpack(FREE_HEAD)
    if n * BLOCK_REF.size != r.end - r.pos:
        raise ProtocolError(f"FREE announces {n} blocks but carries {r.end - r.pos} bytes")
    blocks = [r.unpack(BLOCK_REF) for _ in range(n)]
    return owner, blocks


def encode_indirect(seg: int, offset: int, length: int) -> bytes:
    return INDIRECT.pack(seg, offset, length)


def decode_indirect(body: Buffer) -> Tuple[int, int, int]:
    r = Reader(body)
    v = r.unpack(INDIRECT)
    r.done()
    return v


def encode_reply(ok: bool, code: int = 0, message: str = "", payload: Buffer = b"") -> bytearray:
    out = bytearray(U8.pack(1 if ok else 0))
    if not ok:
        out += ERROR_HEAD.pack(code)
        put_str(out, message)
    out += payload
    return out


def decode_reply(body: Buffer) -> Tuple[bool, int, str, memoryview]:
    """Returns (ok, code, message, payload); payload is the kind-specific remainder."""
    r = Reader(body)
    ok = bool(r.u8())
    code, message = 0, ""
    if not ok:
        (code,) = r.unpack(ERROR_HEAD)
        message = r.str()
    return ok, code, message, r.buf[r.pos :]
