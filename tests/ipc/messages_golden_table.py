"""The table of tests/ipc/test_messages_golden.py: every message kind with a body, as fields
(messages_golden_fields.py turns them into the Python codec's descriptions)."""

from __future__ import annotations

import json
from typing import Any, Callable, List, Tuple

from messages_golden_fields import (
    Fields,
    bls_exec_desc,
    bls_response_fields,
    execute_fields,
    reply_fields,
    request_of,
    response_fields,
    response_of,
    result_desc,
)

from pybackend.ipc import bls_codec, codec, rpc_codec
from pybackend.ipc.execute_codec import encode_execute
from pybackend.ipc.protocol import GPU_HOLD_SEG, PROTOCOL_VERSION, Location, MessageKind, Owner
from pybackend.ipc.response_codec import ResponseDesc
from pybackend.ipc.result_codec import encode_result

# ------------------------------------------------------------------------- the table

HANDLE = bytes(range(64))
BIG = 2**62 + 12345  # u64 fields: beyond 32 bits (JSON ints stay below 2**63)


def inline(name: str, data: bytes, dims: List[int], dtype: int = 8) -> Fields:
    return {
        "name": name,
        "dtype": dtype,
        "location": int(Location.INLINE),
        "dims": dims,
        "byte_size": len(data),
        "data": data.hex(),
    }


def arena(name: str, location: int, seg: int, offset: int, size: int) -> Fields:
    return {
        "name": name,
        "dtype": 11,
        "location": location,
        "dims": [size // 4],
        "byte_size": size,
        "seg": seg,
        "offset": offset,
    }


def gpu(name: str, owner: int, hold: int) -> Fields:
    return {
        "name": name,
        "dtype": 14,
        "location": int(Location.GPU_IPC),
        "dims": [2, 3],
        "byte_size": 12,
        "gpu": {"owner": owner, "device": 1, "hold": hold, "handle": HANDLE.hex(), "offset": 256},
    }


STUB_OUTPUTS = [
    inline("OUT_é", b"\x01\x02\x03\x04", [1, 4], dtype=2),
    inline("EMPTY", b"", [0]),
    arena("BIG", int(Location.STUB_ARENA), 3, 4096, 1 << 20),
    gpu("CUDA", int(Owner.STUB), 77),
]
BACKEND_OUTPUTS = [
    inline("OUT", b"\x05\x06", [2], dtype=13),
    arena("BIG", int(Location.BACKEND_ARENA), 0, 65536, 4096),
    gpu("CUDA", int(Owner.BACKEND), 9),
]
REQUEST = {
    "token": BIG,
    "request_id": "req-1",
    "correlation_id": 42,
    "flags": 3,
    "timeout_us": 5_000_000,
    "parameters": '{"k":"v","n":1,"b":true}',
    "trace_context": "",
    "requested_outputs": ["OUT0", "OUT1"],
    "inputs": [
        inline("IN0", bytes(range(16)), [2, 2]),
        arena("IN1", int(Location.BACKEND_ARENA), 1, 128, 8192),
        gpu("IN2", int(Owner.BACKEND), 0),
    ],
}
REQUEST_STR_CORR = dict(
    REQUEST,
    token=7,
    request_id="",
    correlation_id="seq-ü",
    requested_outputs=[],
    inputs=[],
    parameters="{}",
)
# Requests the server traces in OpenTelemetry mode: the context follows the id.
TRACED = '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'
REQUEST_TRACED = dict(REQUEST, token=8, trace_context=TRACED)
REQUEST_STR_CORR_TRACED = dict(REQUEST_STR_CORR, token=9, trace_context=TRACED)
BLS_EXEC = {
    "model_name": "callee",
    "model_version": -1,
    "decoupled": True,
    "request_id": "bls-1",
    "correlation_id": 9,
    "flags": 1,
    "timeout_us": 1000,
    "preferred_memory": 0,
    "preferred_device": 3,
    "parameters": '{"a":1}',
    "requested_outputs": ["Y"],
    "inputs": [
        inline("X", b"\x00\x00\x80\x3f", [1]),
        arena("Z", int(Location.STUB_ARENA), 2, 512, 1024),
        gpu("G", int(Owner.STUB), 5),
    ],
    "parent_token": BIG,
}


def model_load(d: Fields) -> bytes:
    files = {p: bytes.fromhex(c) for p, c in d["files"].items()}
    return bls_codec.encode_model_load(d["model_name"], d["config"], files)


def metric_op(kind: MessageKind) -> Callable[[Fields], bytes]:
    return lambda d: rpc_codec.encode_metric_op(kind, d["metric_id"], d.get("value", 0.0))


# The backend receives these: (kind, fields, the Python encoder of the fields).
TO_BACKEND: List[Tuple[str, Fields, Callable[[Fields], Any]]] = [
    (
        "HELLO",
        {
            "protocol_version": PROTOCOL_VERSION,
            "pid": 4321,
            "python_version": "3.11.9",
            "numpy_version": "1.26.4",
        },
        lambda d: codec.encode_hello(
            d["protocol_version"], d["pid"], d["python_version"], d["numpy_version"]
        ),
    ),
    (
        "INIT_REPLY",
        {"json": {"ok": True, "config": {"max_batch_size": 8}}},
        lambda d: codec.encode_json(d["json"]),
    ),
    ("FINALIZE_REPLY", {"json": {"error": None}}, lambda d: codec.encode_json(d["json"])),
    (
        "RESULT",
        {
            "error": None,
            "async_seq": 17,
            "items": [
                [
                    1,
                    1,
                    response_fields(
                        response_of(
                            {"error": None, "parameters": '{"p":2}', "outputs": STUB_OUTPUTS}
                        )
                    ),
                ],
                [0, 2, None],
                [1, 1, {"error": [13, "boom ✗"], "parameters": "", "outputs": []}],
            ],
            "freed": [[0, 64], [GPU_HOLD_SEG, 9]],
        },
        lambda d: encode_result(result_desc(d)),
    ),  # fmt: skip
    (
        "RESULT",
        {"error": None, "async_seq": 0, "items": [[0, 1, None]], "freed": []},
        lambda d: encode_result(result_desc(d)),
    ),
    (
        "RESULT",
        {"error": [13, "execute failed: ValueError"]},
        lambda d: encode_result(result_desc(d)),
    ),
    (
        "SEGMENT_ADD",
        {"owner": int(Owner.STUB), "seg": 5, "size": 1 << 33},
        lambda d: codec.encode_segment_add(d["owner"], d["seg"], d["size"]),
    ),
    (
        "SEGMENT_DROP",
        {"owner": int(Owner.STUB), "seg": 5},
        lambda d: codec.encode_segment_drop(d["owner"], d["seg"]),
    ),
    (
        "FREE",
        {"owner": int(Owner.BACKEND), "blocks": [[0, 0], [2, BIG], [GPU_HOLD_SEG, 4]]},
        lambda d: codec.encode_free(d["owner"], [tuple(b) for b in d["blocks"]]),
    ),
    (
        "FREE",
        {"owner": int(Owner.BACKEND), "blocks": []},
        lambda d: codec.encode_free(d["owner"], []),
    ),
    (
        "INDIRECT",
        {"seg": 2, "offset": 1 << 34, "length": 200_000},
        lambda d: codec.encode_indirect(d["seg"], d["offset"], d["length"]),
    ),
    (
        "LOG",
        {"level": 2, "line": 99, "file": "/models/m/1/model.py", "message": "héllo\nworld"},
        lambda d: codec.encode_log(d["level"], d["line"], d["file"], d["message"]),
    ),
    (
        "SEND",
        {
            "token": BIG,
            "send_flags": 1,
            "response": {"error": None, "parameters": "", "outputs": STUB_OUTPUTS},
        },
        lambda d: codec.encode_send(d["token"], d["send_flags"], response_of(d["response"])),
    ),
    (
        "SEND",
        {
            "token": 4,
            "send_flags": 1,
            "response": {"error": [13, "failed"], "fails": True, "parameters": "", "outputs": []},
        },
        lambda d: codec.encode_send(d["token"], d["send_flags"], response_of(d["response"])),
    ),
    (
        "SEND",
        {"token": 3, "send_flags": 1, "response": None},
        lambda d: codec.encode_send(d["token"], d["send_flags"], None),
    ),
    ("IS_CANCELLED", {"id": BIG}, lambda d: rpc_codec.encode_token(d["id"])),
    ("SENDER_DROPPED", {"id": 12}, lambda d: rpc_codec.encode_token(d["id"])),
    ("BLS_EXEC", BLS_EXEC, lambda d: bls_codec.encode_bls_exec(bls_exec_desc(d))),
    (
        "BLS_EXEC",
        dict(BLS_EXEC, correlation_id="corr-str", decoupled=False, inputs=[], parent_token=0),
        lambda d: bls_codec.encode_bls_exec(bls_exec_desc(d)),
    ),
    (
        "METRIC_FAMILY_NEW",
        {"kind": 2, "name": "requests_total", "description": "the requests"},
        lambda d: rpc_codec.encode_metric_family_new(d["kind"], d["name"], d["description"]),
    ),
    ("METRIC_FAMILY_DELETE", {"id": 5}, lambda d: rpc_codec.encode_token(d["id"])),
    (
        "METRIC_NEW",
        {"family_id": 5, "labels": {"model": "m", "é": "x"}, "buckets": [0.5, 1.0, 2.5]},
        lambda d: rpc_codec.encode_metric_new(d["family_id"], d["labels"], d["buckets"]),
    ),
    (
        "METRIC_NEW",
        {"family_id": 6, "labels": {}, "buckets": None},
        lambda d: rpc_codec.encode_metric_new(d["family_id"], d["labels"], d["buckets"]),
    ),
    ("METRIC_VALUE", {"metric_id": BIG}, metric_op(MessageKind.METRIC_VALUE)),
    ("METRIC_INCREMENT", {"metric_id": 1, "value": 2.5}, metric_op(MessageKind.METRIC_INCREMENT)),
    ("METRIC_SET", {"metric_id": 1, "value": -1.25}, metric_op(MessageKind.METRIC_SET)),
    ("METRIC_OBSERVE", {"metric_id": 1, "value": 1e-3}, metric_op(MessageKind.METRIC_OBSERVE)),
    (
        "MODEL_LOAD",
        {
            "model_name": "m2",
            "config": '{"backend":"python"}',
            "files": {"file:1/model.py": b"print(1)\n".hex(), "file:empty": ""},
        },
        model_load,
    ),
    (
        "MODEL_UNLOAD",
        {"model_name": "m2", "unload_dependents": True},
        lambda d: bls_codec.encode_model_unload(d["model_name"], d["unload_dependents"]),
    ),
    (
        "MODEL_READY",
        {"model_name": "m2", "version": -1},
        lambda d: bls_codec.encode_model_ready(d["model_name"], d["version"]),
    ),
]


# The backend sends these: (kind, fields for the C++ encoder, the Python encoding of the same
# message, the Python decoder turning a body into what the fields say).
FROM_BACKEND: List[Tuple[str, Fields, bytes, Callable[[bytes], Fields]]] = [
    (
        "INIT",
        {"json": json.dumps({"model_config": '{"name":"m"}', "model_instance_kind": "CPU"})},
        bytes(codec.encode_json({"model_config": '{"name":"m"}', "model_instance_kind": "CPU"})),
        lambda b: {"json": json.dumps(codec.decode_json(b))},
    ),
    (
        "ATTACH",
        {"json": json.dumps({"model_name": "m", "model_version": 1, "instance_name": "m_0"})},
        bytes(codec.encode_json({"model_name": "m", "model_version": 1, "instance_name": "m_0"})),
        lambda b: {"json": json.dumps(codec.decode_json(b))},
    ),
    (
        "EXECUTE",
        {"requests": [REQUEST, REQUEST_STR_CORR], "freed": [[3, 4096], [GPU_HOLD_SEG, 77]]},
        bytes(
            encode_execute(
                [request_of(REQUEST), request_of(REQUEST_STR_CORR)], [(3, 4096), (GPU_HOLD_SEG, 77)]
            )
        ),
        execute_fields,
    ),
    (
        "EXECUTE",
        {"requests": [REQUEST_STR_CORR], "freed": []},
        bytes(encode_execute([request_of(REQUEST_STR_CORR)])),
        execute_fields,
    ),
    (
        "EXECUTE",
        {"requests": [REQUEST_TRACED, REQUEST, REQUEST_STR_CORR_TRACED], "freed": []},
        bytes(
            encode_execute(
                [request_of(r) for r in (REQUEST_TRACED, REQUEST, REQUEST_STR_CORR_TRACED)]
            )
        ),
        execute_fields,
    ),
    (
        "SEGMENT_ADD",
        {"owner": int(Owner.BACKEND), "seg": 1, "size": 1 << 26},
        codec.encode_segment_add(Owner.BACKEND, 1, 1 << 26),
        lambda b: dict(zip(("owner", "seg", "size"), codec.decode_segment_add(b))),
    ),
    (
        "SEGMENT_DROP",
        {"owner": int(Owner.BACKEND), "seg": 1},
        codec.encode_segment_drop(Owner.BACKEND, 1),
        lambda b: dict(zip(("owner", "seg"), codec.decode_segment_drop(b))),
    ),
    (
        "FREE",
        {"owner": int(Owner.STUB), "blocks": [[3, 4096], [GPU_HOLD_SEG, BIG]]},
        bytes(codec.encode_free(Owner.STUB, [(3, 4096), (GPU_HOLD_SEG, BIG)])),
        lambda b: (lambda o, bl: {"owner": o, "blocks": [list(x) for x in bl]})(
            *codec.decode_free(b)
        ),
    ),
    (
        "FREE",
        {"owner": int(Owner.STUB), "blocks": []},
        bytes(codec.encode_free(Owner.STUB, [])),
        lambda b: (lambda o, bl: {"owner": o, "blocks": [list(x) for x in bl]})(
            *codec.decode_free(b)
        ),
    ),
    (
        "INDIRECT",
        {"seg": 0, "offset": 8192, "length": 300_000},
        codec.encode_indirect(0, 8192, 300_000),
        lambda b: dict(zip(("seg", "offset", "length"), codec.decode_indirect(b))),
    ),
    (
        "REPLY",
        {"ok": False, "code": 13, "message": "Failed to process ✗", "payload": ""},
        bytes(codec.encode_reply(False, 13, "Failed to process ✗")),
        reply_fields,
    ),
    (
        "REPLY",
        {"ok": True, "code": 0, "message": "", "payload": "empty"},
        bytes(codec.encode_reply(True)),
        reply_fields,
    ),
    (
        "REPLY",
        {"ok": True, "code": 0, "message": "", "payload": "flag", "value": True},
        bytes(codec.encode_reply(True, payload=b"\x01")),
        reply_fields,
    ),
    (
        "REPLY",
        {"ok": True, "code": 0, "message": "", "payload": "id", "value": BIG},
        bytes(codec.encode_reply(True, payload=rpc_codec.encode_id_payload(BIG))),
        reply_fields,
    ),
    (
        "REPLY",
        {"ok": True, "code": 0, "message": "", "payload": "value", "value": -3.5},
        bytes(codec.encode_reply(True, payload=rpc_codec.encode_value_payload(-3.5))),
        reply_fields,
    ),
    (
        "BLS_RESPONSE",
        {
            "flags": 1,
            "response": {"error": None, "parameters": '{"x":1}', "outputs": BACKEND_OUTPUTS},
        },
        bytes(
            bls_codec.encode_bls_response(
                1,
                response_of({"error": None, "parameters": '{"x":1}', "outputs": BACKEND_OUTPUTS}),
            )
        ),
        bls_response_fields,
    ),
    (
        "BLS_RESPONSE",
        {"flags": 1, "response": {"error": [3, "Model callee - not ready"]}},
        bytes(
            bls_codec.encode_bls_response(1, ResponseDesc(error=(3, "Model callee - not ready")))
        ),
        bls_response_fields,
    ),
    (
        "BLS_RESPONSE",
        {"flags": 1, "response": None},
        bytes(bls_codec.encode_bls_response(1, None)),
        bls_response_fields,
    ),
]

# Kinds without a body (FINALIZE, LANE, BLS_CANCEL) have nothing to agree on.
NO_BODY = {"FINALIZE", "LANE", "BLS_CANCEL"}
