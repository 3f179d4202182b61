"""The stub's small requests to the backend and the payloads of their REPLY (docs/protocol.md,
"Message kinds"): IS_CANCELLED and SENDER_DROPPED (a request's token), and the custom-metric
messages METRIC_*. The REPLY envelope itself is in control_codec. C++: csrc/ipc/messages/rpc.h.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Tuple

from .primitives import F64, U8, U64, Buffer, Reader, put_str
from .protocol import MessageKind

_ID_VALUE = struct.Struct("<Qd")
_FAMILY_ID_N = struct.Struct("<QI")


def encode_token(token: int) -> bytes:
    """IS_CANCELLED, SENDER_DROPPED (a request's token) and METRIC_FAMILY_DELETE (a family
    id): a single u64."""
    return U64.pack(token)


def decode_token(body: Buffer) -> int:
    r = Reader(body)
    v = r.u64()
    r.done()
    return v


def encode_metric_family_new(kind: int, name: str, description: str) -> bytearray:
    out = bytearray(U8.pack(kind))
    put_str(out, name)
    put_str(out, description)
    return out


def decode_metric_family_new(body: Buffer) -> Tuple[int, str, str]:
    r = Reader(body)
    kind = r.u8()
    name, description = r.str(), r.str()
    r.done()
    return kind, name, description


def encode_metric_new(
    family_id: int, labels: Dict[str, str], buckets: Optional[List[float]]
) -> bytearray:
    out = bytearray(_FAMILY_ID_N.pack(family_id, len(labels)))
    for key, value in labels.items():
        put_str(out, key)
        put_str(out, value)
    if buckets is None:
        out += b"\x00"
    else:
        out += struct.pack(f"<BI{len(buckets)}d", 1, len(buckets), *buckets)
    return out


def decode_metric_new(body: Buffer) -> Tuple[int, Dict[str, str], Optional[List[float]]]:
    r = Reader(body)
    family_id, n = r.unpack(_FAMILY_ID_N)
    labels = {}
    for _ in range(n):
        key = r.str()
        labels[key] = r.str()
    buckets = list(r.unpack(struct.Struct(f"<{r.u32()}d"))) if r.u8() else None
    r.done()
    return family_id, labels, buckets


def encode_metric_op(kind: int, metric_id: int, value: float = 0.0) -> bytes:
    """METRIC_VALUE carries the id alone; METRIC_INCREMENT, METRIC_SET, METRIC_OBSERVE the
    id and a value."""
    if kind == MessageKind.METRIC_VALUE:
        return U64.pack(metric_id)
    return _ID_VALUE.pack(metric_id, value)


def decode_metric_op(kind: int, body: Buffer) -> Tuple[int, float]:
    r = Reader(body)
    if kind == MessageKind.METRIC_VALUE:
        metric_id, value = r.u64(), 0.0
    else:
        metric_id, value = r.unpack(_ID_VALUE)
    r.done()
    return metric_id, value


# REPLY payloads (after control_codec.decode_reply's envelope).


def decode_flag_payload(payload: Buffer) -> bool:
    """IS_CANCELLED (cancelled) and MODEL_READY (ready)."""
    return bool(U8.unpack_from(payload, 0)[0])


def decode_id_payload(payload: Buffer) -> int:
    """METRIC_FAMILY_NEW and METRIC_NEW: the new family's or metric's id."""
    return U64.unpack_from(payload, 0)[0]


def decode_value_payload(payload: Buffer) -> float:
    """METRIC_VALUE."""
    return F64.unpack_from(payload, 0)[0]


def encode_id_payload(id_: int) -> bytes:
    return U64.pack(id_)


def encode_value_payload(value: float) -> bytes:
    return F64.pack(value)
