"""ExecuteBody (docs/protocol.md, "ExecuteBody"): the requests of one EXECUTE, written by
the backend (and the offline driver) and read by the stub on its hot path.

:func:`decode_execute` is the hot path: flat offset arithmetic over a ``memoryview``, one
precompiled struct per group of fixed fields, inline tensor payloads as zero-copy slices.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .free_codec import append_freed, read_freed
from .primitives import (
    FLAGS_TIMEOUT,
    REQUEST_HEAD,
    U32,
    U64,
    Buffer,
    ProtocolError,
    put_str,
)
from .tensor_codec import STR_LEN, TensorDesc, put_tensor, str_at, tensor_at, truncated


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
        "trace_context",
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
        trace_context: Optional[str] = "",
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
        self.trace_context = trace_context or ""  # OpenTelemetry context ("": none)

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
        put_correlation_id(out, q.correlation_id, q.trace_context)
        out += FLAGS_TIMEOUT.pack(q.flags, q.timeout_us)
        put_str(out, q.parameters)
        put_outputs_and_inputs(out, q.requested_outputs, q.inputs)
    if freed:
        append_freed(out, freed)
    return out


#: EXECUTE only: a correlation id kind with this bit is followed by ``str trace_context``.
CORRELATION_TRACED = 2


def put_correlation_id(out: bytearray, cid: Union[int, str], trace_context: str = "") -> None:
    """u8 kind (0 integer, 1 string), then a u64 or a str: EXECUTE and BLS_EXEC alike; in
    EXECUTE a request's OpenTelemetry context follows, with the kind's TRACED bit."""
    traced = CORRELATION_TRACED if trace_context else 0
    if isinstance(cid, str):
        out.append(1 | traced)
        put_str(out, cid)
    else:
        out.append(traced)
        out += U64.pack(cid)
    if traced:
        put_str(out, trace_context)


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


_STR_LEN = STR_LEN
_TOKEN_AND_LEN = struct.Struct("<QI").unpack_from  # token, request_id length
_FLAGS_TIMEOUT_LEN = struct.Struct("<IQI").unpack_from  # flags, timeout, parameters length


def decode_execute(
    body: Buffer,
    tensor: Callable[..., Any] = TensorDesc,
    request: Callable[..., Any] = RequestDesc,
    freed: Optional[List[Tuple[int, int]]] = None,
) -> List[Any]:
    """The hot-path decoder: flat offset arithmetic, no per-field method calls.

    ``tensor(name, dtype, location, dims, byte_size, seg, offset, data)`` and
    ``request(token, request_id, correlation_id, flags, timeout_us, parameters,
    requested_outputs, inputs, trace_context)`` (the last None when the request has no
    OpenTelemetry context) build the results (by default ``TensorDesc`` and
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
                raise truncated(pos, end)
            # Most requests have no id: "" without a slice and a decode.
            request_id = str(mv[pos:e], "utf-8", "surrogateescape") if idlen else ""
            corr_kind = mv[e]
            pos = e + 1
            if corr_kind & ~3:
                raise ProtocolError(f"unknown correlation id kind {corr_kind}")
            if corr_kind & 1:
                corr, pos = str_at(mv, pos, end)
            else:
                (corr,) = U64.unpack_from(mv, pos)
                pos += 8
            trace = None
            if corr_kind & CORRELATION_TRACED:  # the context follows the id
                trace, pos = str_at(mv, pos, end)
            flags, timeout, plen = _FLAGS_TIMEOUT_LEN(mv, pos)
            pos += 16
            e = pos + plen
            if e > end:
                raise truncated(pos, end)
            params = str(mv[pos:e], "utf-8", "surrogateescape")
            (k,) = _STR_LEN(mv, e)
            pos = e + 4
            requested = []
            for _ in range(k):
                name, pos = str_at(mv, pos, end)
                requested.append(name)
            (k,) = _STR_LEN(mv, pos)
            pos += 4
            inputs = []
            for _ in range(k):
                t, pos = tensor_at(mv, pos, end, tensor)
                inputs.append(t)
            requests.append(
                request(token, request_id, corr, flags, timeout, params, requested, inputs, trace)
            )
        if pos < end:  # the optional freed trailer
            blocks = read_freed(mv, pos, end)
            if freed is not None:
                freed += blocks
            pos = end
    except (struct.error, IndexError):
        raise ProtocolError(f"EXECUTE body of {end} bytes is truncated") from None
    return requests
