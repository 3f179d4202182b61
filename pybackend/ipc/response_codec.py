"""ResponseBody (docs/protocol.md, "ResponseBody"): an error or parameters plus output
tensors, as RESULT, SEND and BLS_RESPONSE carry it; and the SEND body that carries one."""

from __future__ import annotations

import struct
from typing import Optional, Sequence, Tuple, Union

from .primitives import ERROR_HEAD, SEND_HEAD, U32, Buffer, Reader, put_str
from .tensor_codec import STR_LEN, TensorDesc, put_tensor, str_at, tensor_at, truncated

#: ResponseBody's first byte: no error, an error response the model made (its answer), an
#: error of the stub's own that fails the request (the statistics count it as failed).
NO_ERROR, MODEL_ERROR, FAILURE = 0, 1, 2


class ResponseDesc:
    """ResponseBody: an error (code, message) or parameters plus output tensors. ``fails``:
    the error is the stub's own (the request failed), not a response the model made."""

    __slots__ = ("error", "parameters", "outputs", "fails")

    def __init__(
        self,
        outputs: Sequence[TensorDesc] = (),
        parameters: str = "",
        error: Optional[Tuple[int, str]] = None,
        fails: bool = False,
    ) -> None:
        self.outputs = list(outputs)
        self.parameters = parameters
        self.error = error
        self.fails = fails and error is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResponseDesc):
            return NotImplemented
        return (self.error, self.parameters, self.outputs, self.fails) == (
            other.error,
            other.parameters,
            other.outputs,
            other.fails,
        )

    def __repr__(self) -> str:
        return (
            f"ResponseDesc(outputs={self.outputs}, parameters={self.parameters!r}, "
            f"error={self.error}, fails={self.fails})"
        )


def put_response(out: bytearray, resp: Union[ResponseDesc, bytes, bytearray]) -> None:
    """``resp`` may also be an already encoded ResponseBody (the stub's Placer writes
    those directly): it is spliced in as it is."""
    if not isinstance(resp, ResponseDesc):
        out += resp
        return
    if resp.error is not None:
        out.append(FAILURE if resp.fails else MODEL_ERROR)
        out += ERROR_HEAD.pack(resp.error[0])
        put_str(out, resp.error[1])
    else:
        out += b"\x00"
    put_str(out, resp.parameters)
    out += U32.pack(len(resp.outputs))
    for t in resp.outputs:
        put_tensor(out, t)


def read_response(r: Reader) -> ResponseDesc:
    try:
        resp, r.pos = response_at(r.buf, r.pos, r.end)
    except (struct.error, IndexError):
        raise truncated(r.pos, r.end) from None
    return resp


def response_at(mv: memoryview, pos: int, end: int) -> Tuple[ResponseDesc, int]:
    """The ResponseBody at ``pos`` (INLINE output data views of ``mv``) and the offset
    after it; a truncated body raises struct.error or IndexError (tensor_codec's flat
    reading)."""
    error = None
    fails = mv[pos] == FAILURE
    if mv[pos]:
        (code,) = ERROR_HEAD.unpack_from(mv, pos + 1)
        message, pos = str_at(mv, pos + 5, end)
        error = (code, message)
    else:
        pos += 1
    params, pos = str_at(mv, pos, end)
    (n,) = STR_LEN(mv, pos)
    pos += 4
    outputs = []
    for _ in range(n):
        t, pos = tensor_at(mv, pos, end)
        outputs.append(t)
    return ResponseDesc(outputs, params, error, fails), pos


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
