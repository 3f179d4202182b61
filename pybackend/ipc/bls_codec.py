"""Bodies of the BLS and model-control messages (docs/protocol.md, "BLS" and "Model
control"): BLS_EXEC, BLS_RESPONSE, MODEL_LOAD, MODEL_UNLOAD, MODEL_READY."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .codec import (
    FLAGS_TIMEOUT,
    I64,
    U8,
    U32,
    U64,
    Buffer,
    ProtocolError,
    Reader,
    ResponseDesc,
    TensorDesc,
    put_blob,
    put_correlation_id,
    put_outputs_and_inputs,
    put_response,
    put_str,
    read_tensor,
)
from .response_codec import response_at

PREFERRED = struct.Struct("<Bq")  # u8 memory type (0 GPU, 1 CPU, 2 default), i64 device id
RESPONSE_HEAD = struct.Struct("<IB")  # u32 response flags, u8 has_response
#: A BLS_RESPONSE flag of ours beside Triton's FINAL (csrc/ipc/messages/bls.h): an error
#: response because the outputs found no room in the caller's shared memory, not the callee's.
UNDELIVERED = 1 << 31
# Neighbouring fixed fields of BlsExecBody packed at once (one call less each per BLS call).
_VERSION_DECOUPLED = struct.Struct("<qB")  # i64 model_version, u8 decoupled
_FLAGS_TO_DEVICE = struct.Struct("<IQBq")  # FLAGS_TIMEOUT, then PREFERRED


class BlsExecDesc:
    """One BLS request as it travels to the backend."""

    __slots__ = (
        "model_name",
        "model_version",
        "decoupled",
        "request_id",
        "correlation_id",
        "flags",
        "timeout_us",
        "preferred_memory",
        "preferred_device",
        "parameters",
        "requested_outputs",
        "inputs",
        "parent_token",
    )

    def __init__(
        self,
        model_name: str,
        model_version: int = -1,
        decoupled: bool = False,
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        flags: int = 0,
        timeout_us: int = 0,
        preferred_memory: int = 2,
        preferred_device: int = 0,
        parameters: str = "",
        requested_outputs: Sequence[str] = (),
        inputs: Sequence[TensorDesc] = (),
        parent_token: int = 0,
    ) -> None:
        self.model_name = model_name
        self.model_version = model_version
        self.decoupled = decoupled
        self.request_id = request_id
        self.correlation_id = correlation_id
        self.flags = flags
        self.timeout_us = timeout_us
        self.preferred_memory = preferred_memory
        self.preferred_device = preferred_device
        self.parameters = parameters
        self.requested_outputs = list(requested_outputs)
        self.inputs = list(inputs)
        self.parent_token = parent_token

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlsExecDesc):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


def encode_bls_exec(d: BlsExecDesc) -> bytearray:
    out = bytearray()
    put_str(out, d.model_name)
    out += _VERSION_DECOUPLED.pack(d.model_version, 1 if d.decoupled else 0)
    put_str(out, d.request_id)
    put_correlation_id(out, d.correlation_id)
    out += _FLAGS_TO_DEVICE.pack(d.flags, d.timeout_us, d.preferred_memory, d.preferred_device)
    put_str(out, d.parameters)
    put_outputs_and_inputs(out, d.requested_outputs, d.inputs)
    out += U64.pack(d.parent_token)
    return out


def decode_bls_exec(body: Buffer) -> BlsExecDesc:
    r = Reader(body)
    name = r.str()
    (version,) = r.unpack(I64)
    decoupled = bool(r.u8())
    request_id = r.str()
    corr: Union[int, str] = r.u64() if r.u8() == 0 else r.str()
    flags, timeout = r.unpack(FLAGS_TIMEOUT)
    mem, dev = r.unpack(PREFERRED)
    params = r.str()
    requested = [r.str() for _ in range(r.u32())]
    inputs = [read_tensor(r) for _ in range(r.u32())]
    parent = r.u64()
    r.done()
    return BlsExecDesc(
        name,
        version,
        decoupled,
        request_id,
        corr,
        flags,
        timeout,
        mem,
        dev,
        params,
        requested,
        inputs,
        parent,
    )


def encode_bls_response(flags: int, resp: Optional[ResponseDesc]) -> bytearray:
    out = bytearray(RESPONSE_HEAD.pack(flags, 0 if resp is None else 1))
    if resp is not None:
        put_response(out, resp)
    return out


def decode_bls_response(body: Buffer) -> Tuple[int, Optional[ResponseDesc]]:
    """(response flags, ResponseDesc or None). INLINE tensor data are views of ``body``.
    Flat offsets, no Reader: the stub reads one per BLS call."""
    mv = body if isinstance(body, memoryview) else memoryview(body)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    end = mv.nbytes
    try:
        flags, has = RESPONSE_HEAD.unpack_from(mv, 0)
        resp, pos = response_at(mv, 5, end) if has else (None, 5)
    except (struct.error, IndexError):
        raise ProtocolError(f"BLS_RESPONSE body of {end} bytes is truncated") from None
    if pos != end:
        raise ProtocolError(f"{end - pos} unexpected trailing bytes in body")
    return flags, resp


def encode_model_load(name: str, config: str, files: Optional[Dict[str, bytes]]) -> bytearray:
    out = bytearray()
    put_str(out, name)
    put_str(out, config)
    items: List[Tuple[str, bytes]] = list((files or {}).items())
    out += U32.pack(len(items))
    for path, content in items:
        put_str(out, path)
        put_blob(out, content)
    return out


def encode_model_unload(name: str, unload_dependents: bool) -> bytearray:
    out = bytearray()
    put_str(out, name)
    out += U8.pack(1 if unload_dependents else 0)
    return out


def encode_model_ready(name: str, version: int) -> bytearray:
    out = bytearray()
    put_str(out, name)
    out += I64.pack(version)
    return out
