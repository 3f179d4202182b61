"""Fields (the JSON shapes csrc/tests/messages_golden.cc reads and writes) to and from the
Python codec's descriptions, for tests/ipc/test_messages_golden.py."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from pybackend.ipc import bls_codec, codec
from pybackend.ipc.execute_codec import RequestDesc, decode_execute
from pybackend.ipc.protocol import Location
from pybackend.ipc.response_codec import ResponseDesc
from pybackend.ipc.result_codec import ResultDesc
from pybackend.ipc.tensor_codec import GpuRef, TensorDesc

Fields = Dict[str, Any]

# ----------------------------------------------------------------- fields <-> descriptions


def tensor_fields(t: TensorDesc) -> Fields:
    d: Fields = {
        "name": t.name,
        "dtype": t.dtype,
        "location": t.location,
        "dims": list(t.dims),
        "byte_size": t.byte_size,
    }
    if t.location == Location.INLINE:
        d["data"] = bytes(t.data or b"").hex()  # type: ignore[arg-type]
    elif t.location == Location.GPU_IPC:
        g = t.data
        assert isinstance(g, GpuRef)
        d["gpu"] = {
            "owner": g.owner,
            "device": g.device,
            "hold": g.hold,
            "handle": g.handle.hex(),
            "offset": g.offset,
        }
    else:
        d["seg"], d["offset"] = t.seg, t.offset
    return d


def tensor_of(d: Fields) -> TensorDesc:
    loc = d["location"]
    if loc == Location.INLINE:
        data: Any = bytes.fromhex(d["data"])
        return TensorDesc(d["name"], d["dtype"], loc, d["dims"], d["byte_size"], data=data)
    if loc == Location.GPU_IPC:
        g = d["gpu"]
        ref = GpuRef(g["owner"], g["device"], g["hold"], bytes.fromhex(g["handle"]), g["offset"])
        return TensorDesc(d["name"], d["dtype"], loc, d["dims"], d["byte_size"], data=ref)
    return TensorDesc(d["name"], d["dtype"], loc, d["dims"], d["byte_size"], d["seg"], d["offset"])


def response_fields(r: Optional[ResponseDesc]) -> Optional[Fields]:
    if r is None:
        return None
    fields: Fields = {"error": list(r.error) if r.error is not None else None}
    if r.fails:  # only there when set: an error of the stub's own
        fields["fails"] = True
    fields["parameters"] = r.parameters
    fields["outputs"] = [tensor_fields(t) for t in r.outputs]
    return fields


def response_of(d: Optional[Fields]) -> Optional[ResponseDesc]:
    if d is None:
        return None
    err = d["error"]
    return ResponseDesc(
        [tensor_of(t) for t in d.get("outputs", [])],
        d.get("parameters", ""),
        (err[0], err[1]) if err is not None else None,
        bool(d.get("fails", False)),
    )


def request_fields(q: RequestDesc) -> Fields:
    return {
        "token": q.token,
        "request_id": q.request_id,
        "correlation_id": q.correlation_id,
        "flags": q.flags,
        "timeout_us": q.timeout_us,
        "parameters": q.parameters,
        "requested_outputs": list(q.requested_outputs),
        "inputs": [tensor_fields(t) for t in q.inputs],
        "trace_context": q.trace_context,
    }


def request_of(d: Fields) -> RequestDesc:
    return RequestDesc(
        d["token"],
        d["request_id"],
        d["correlation_id"],
        d["flags"],
        d["timeout_us"],
        d["parameters"],
        d["requested_outputs"],
        [tensor_of(t) for t in d["inputs"]],
        d["trace_context"],
    )


def bls_exec_desc(d: Fields) -> bls_codec.BlsExecDesc:
    return bls_codec.BlsExecDesc(
        d["model_name"],
        d["model_version"],
        d["decoupled"],
        d["request_id"],
        d["correlation_id"],
        d["flags"],
        d["timeout_us"],
        d["preferred_memory"],
        d["preferred_device"],
        d["parameters"],
        d["requested_outputs"],
        [tensor_of(t) for t in d["inputs"]],
        d["parent_token"],
    )


def result_desc(d: Fields) -> ResultDesc:
    if d["error"] is not None:
        return ResultDesc(error=(d["error"][0], d["error"][1]))
    items = [(k, f, response_of(r)) for k, f, r in d["items"]]
    return ResultDesc(items, d["async_seq"], freed=[(s, o) for s, o in d["freed"]])


def execute_fields(body: bytes) -> Fields:
    freed: List[Tuple[int, int]] = []
    requests = decode_execute(body, freed=freed)
    return {"requests": [request_fields(q) for q in requests], "freed": [list(b) for b in freed]}


def reply_fields(body: bytes) -> Fields:
    ok, code, message, payload = codec.decode_reply(body)
    return {"ok": ok, "code": code, "message": message, "payload": bytes(payload).hex()}


def bls_response_fields(body: bytes) -> Fields:
    flags, resp = bls_codec.decode_bls_response(body)
    return {"flags": flags, "response": response_fields(resp)}
