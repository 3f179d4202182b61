"""The bodies of the session's housekeeping messages (docs/protocol.md, "Message kinds"):
HELLO, the json of INIT and its reply, LOG, SEGMENT_ADD and SEGMENT_DROP, an INDIRECT
reference, and an RPC's REPLY."""

from __future__ import annotations

import json
from typing import Any, Tuple

from .primitives import (
    ERROR_HEAD,
    HELLO_HEAD,
    INDIRECT,
    LOG_HEAD,
    SEGMENT_ADD,
    SEGMENT_DROP,
    U8,
    Buffer,
    Reader,
    put_str,
)


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
