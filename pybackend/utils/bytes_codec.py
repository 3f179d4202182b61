"""Triton's BYTES tensor encoding: per element a u32 little-endian length, then the bytes.

Both directions are vectorised with numpy where the format allows it; the decoder still
walks the length prefixes (each one gives the next offset) but copies nothing twice.
"""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Tuple, Union

import numpy as np

_U32 = struct.Struct("<I")


class BytesTensorError(ValueError, struct.error):
    """Malformed serialized BYTES data (also a ``struct.error``, what upstream raised)."""


def _element_bytes(arr: np.ndarray) -> List[bytes]:
    if arr.dtype.kind == "S":
        # .tolist() gives bytes with numpy's trailing-NUL stripping, like upstream.
        return arr.ravel(order="C").tolist()
    out: List[bytes] = []
    append = out.append
    for x in arr.ravel(order="C").tolist():
        if isinstance(x, bytes):
            append(x)
        else:
            append(str(x).encode("utf-8"))
    return out


def serialize_to_bytes(arr: np.ndarray) -> bytes:
    """Serialized form of an object/``S`` array (``b""`` when empty)."""
    items = _element_bytes(arr)
    n = len(items)
    if n == 0:
        return b""
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
    if lengths.max(initial=0) > 0xFFFFFFFF:
        raise ValueError("a BYTES element is larger than 4 GiB and cannot be serialized")
    payload = b"".join(items)
    total = 4 * n + len(payload)
    out = np.empty(total, np.uint8)
    # Element i starts at 4*i + sum(lengths[:i]); its header takes 4 bytes there.
    starts = np.arange(n, dtype=np.int64) * 4
    starts[1:] += np.cumsum(lengths[:-1])
    header_pos = (starts[:, None] + np.arange(4, dtype=np.int64)).ravel()
    out[header_pos] = lengths.astype("<u4").view(np.uint8)
    if payload:
        mask = np.ones(total, dtype=bool)
        mask[header_pos] = False
        out[mask] = np.frombuffer(payload, np.uint8)
    return out.tobytes()


def serialize_byte_tensor(input_tensor: np.ndarray) -> Union[bytes, Tuple[()], None]:
    """pb_utils.serialize_byte_tensor: ``()`` for an empty array, the serialized ``bytes``
    for object/``bytes_`` arrays, ``None`` for any other dtype."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype.kind not in "OS":
        return None
    return serialize_to_bytes(input_tensor)


def split_bytes(buf: Any, count: Optional[int] = None) -> List[bytes]:
    """Parse serialized BYTES data into a list of ``bytes``; ``count`` (when known) must
    match the number of elements found."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else buf
    end = len(mv)
    pos = 0
    out: List[bytes] = []
    append = out.append
    unpack = _U32.unpack_from
    while pos < end:
        if pos + 4 > end:
            raise BytesTensorError("Invalid bytes tensor data: incomplete length field")
        (n,) = unpack(mv, pos)
        pos += 4
        nxt = pos + n
        if nxt > end:
            raise BytesTensorError("Invalid bytes tensor data: string extends beyond buffer")
        append(bytes(mv[pos:nxt]))
        pos = nxt
    if count is not None and len(out) != count:
        raise BytesTensorError(
            f"Invalid bytes tensor data: expected {count} elements, found {len(out)}"
        )
    return out


def to_object_array(items: List[bytes]) -> np.ndarray:
    arr = np.empty(len(items), dtype=np.object_)
    if items:
        arr[:] = items
    return arr


def deserialize_bytes_tensor(encoded_tensor: Any) -> np.ndarray:
    """pb_utils.deserialize_bytes_tensor: a 1-D ``np.object_`` array of ``bytes``."""
    return to_object_array(split_bytes(encoded_tensor))
