"""The primitive encodings of docs/protocol.md ("Primitive encodings"): every fixed layout
of the protocol as a precompiled ``struct.Struct``, ``str``/``blob`` writers, and the
bounds-checked :class:`Reader` the message decoders walk a body with.

Truncated or inconsistent input raises :class:`ProtocolError`, never an IndexError.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Tuple, Union

from ..errors import PybackendError

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

Buffer = Union[bytes, bytearray, memoryview]


class ProtocolError(PybackendError):
    """A peer sent bytes that do not follow docs/protocol.md."""


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
