"""ResultBody (docs/protocol.md, "ResultBody"): what the stub answers an EXECUTE with, a
batch error or one item per request, and the backend blocks freed with it."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from .free_codec import append_freed, read_freed
from .primitives import (
    ERROR_HEAD,
    PER_RESULT,
    RESULT_OK_HEAD,
    SEQ_N,
    U8,
    U32,
    Buffer,
    ProtocolError,
    Reader,
    put_str,
)
from .protocol import ResultKind, ResultStatus
from .response_codec import ResponseDesc, put_response, read_response


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


def begin_result(n: int) -> bytearray:
    """An OK ResultBody of ``n`` items written in place (the stub's hot path): each item
    follows as its PER_RESULT head and, for a RESPONSE, its ResponseBody; then
    :func:`end_result` sets ``async_seq``, which is known only once the items are written."""
    return bytearray(RESULT_OK_HEAD.pack(ResultStatus.OK, 0, n))


def end_result(out: bytearray, async_seq: int) -> bytearray:
    U32.pack_into(out, 1, async_seq)  # after the u8 status (RESULT_OK_HEAD)
    return out


def encode_result(result: ResultDesc) -> bytearray:
    if result.error is not None:
        return encode_result_error(*result.error)
    out = begin_result(len(result.items))
    for kind, release_flags, resp in result.items:
        out += PER_RESULT.pack(kind, release_flags)
        if kind == ResultKind.RESPONSE:
            put_response(out, resp)  # type: ignore[arg-type]
    if result.freed:
        append_freed(out, result.freed)
    return end_result(out, result.async_seq)


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
            freed = read_freed(r.buf, r.pos, r.end)
            r.pos = r.end
        res = ResultDesc(items, seq, freed=freed)
    else:
        raise ProtocolError(f"unknown result status {status}")
    r.done()
    return res
