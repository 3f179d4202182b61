"""Triton's BYTES tensor encoding: per element a u32 little-endian length, then the bytes.

Both directions are vectorised with numpy. The decoder must follow the length prefixes
(each one gives the next offset), so it decodes runs of equal-length elements (the common
case: fixed-width tokens, ids, hashes) as one numpy matrix each, and falls back to a plain
loop only where lengths keep changing (UV-11).
"""

from __future__ import annotations

import struct
from typing import Any, List, NoReturn, Optional, Tuple, Union

import numpy as np

from . import native

_U32 = struct.Struct("<I")
_SMALL = 64  # up to this many elements, serialize with a plain join
# A padded matrix of the elements (n x longest) may be this many times the data (+64 KiB);
# beyond, the encoder joins the elements and the decoder slices them.
_PAD_SLACK = 4


class BytesTensorError(ValueError, struct.error):
    """Malformed serialized BYTES data (also a ``struct.error``, what upstream raised)."""


def _element_bytes(arr: np.ndarray) -> List[bytes]:
    if arr.dtype.kind == "S":
        # .tolist() gives bytes with numpy's trailing-NUL stripping, like upstream.
        return arr.ravel(order="C").tolist()
    items = arr.ravel(order="C").tolist()
    if set(map(type, items)) <= {bytes}:
        return items  # the common case, checked in C instead of per element in Python
    out: List[bytes] = []
    append = out.append
    for x in items:
        # Exactly bytes, as upstream's `type(x) == bytes`: a subclass such as np.bytes_
        # (an element taken from an 'S' array) is sent as str(x), i.e. b"b'ab'".
        if type(x) is bytes:
            append(x)
        else:
            append(str(x).encode("utf-8"))
    return out


def _too_long() -> NoReturn:
    raise ValueError("a BYTES element is larger than 4 GiB and cannot be serialized")


def _join_equal(items: List[bytes], width: int) -> bytes:
    """All elements ``width`` bytes long (ids, hashes, fixed-width tokens): each is preceded
    by the same 4-byte header, so a join with it as separator builds the whole tensor in C
    (2x a per-element loop at 32 elements, 2x numpy at 5,000)."""
    if width > 0xFFFFFFFF:
        _too_long()
    head = _U32.pack(width)
    return head + head.join(items)


def serialize_to_bytes(arr: np.ndarray) -> bytes:
    """Serialized form of an object/``S`` array (``b""`` when empty)."""
    items = _element_bytes(arr)
    n = len(items)
    if n == 0:
        return b""
    if n <= _SMALL:
        # A few elements: numpy's fixed costs exceed a plain join (~0.1 us per element).
        widths = set(map(len, items))
        if len(widths) == 1:
            return _join_equal(items, widths.pop())
        pack = _U32.pack
        parts: List[bytes] = []
        append = parts.append
        for x in items:
            if len(x) > 0xFFFFFFFF:
                _too_long()
            append(pack(len(x)))
            append(x)
        return b"".join(parts)
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
    longest = int(lengths.max())
    if longest > 0xFFFFFFFF:
        _too_long()
    if int(lengths.min()) == longest:
        return _join_equal(items, longest)
    total = 4 * n + int(lengths.sum())
    out = np.empty(total, np.uint8)
    lib = native.helpers
    if lib is not None:
        # C interleaves the headers with the elements (1M short elements: ~100 ms in all,
        # against ~210 ms with numpy's index arrays below). Its source: numpy's padded
        # matrix of the elements (one C call, faster than joining a million objects), or
        # their join when one long element would make that matrix too large.
        lens = lengths.astype(np.uint32)
        if n * longest <= _PAD_SLACK * total + (1 << 16):
            rows = np.array(items, dtype=f"S{longest}")
            lib.pb_bytes_pack(rows.ctypes.data, longest, lens.ctypes.data, n, out.ctypes.data)
        else:
            lib.pb_bytes_pack(b"".join(items), 0, lens.ctypes.data, n, out.ctypes.data)
        return out.tobytes()
    payload = b"".join(items)
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


def to_object_array(items: List[bytes]) -> np.ndarray:
    arr = np.empty(len(items), dtype=np.object_)
    if items:
        arr[:] = items
    return arr


def split_bytes(buf: Any, count: Optional[int] = None) -> List[bytes]:
    """Parse serialized BYTES data into a list of ``bytes``; ``count`` (when known) must
    match the number of elements found."""
    return decode_object_array(buf, count).tolist()


# Runs of equal-length elements are decoded with numpy: a run of k elements of length L is
# a (k, 4 + L) byte matrix whose first 4 columns all hold L; its other columns, viewed as
# one ``V<L>`` item per row, become ``bytes`` objects in a single ``astype(object)``
# (``V``, not ``S``: ``S`` would strip trailing NULs).
# Where lengths keep changing, a probe costs more than it saves: the plain loop then takes
# ever longer stretches (doubling after each probe that found no run).
_PROBE_FIRST = 64  # elements checked by the first vectorised probe at a position
_MIN_RUN = 8  # shorter runs go through the loop
_SCALAR_FIRST = 32
_SCALAR_MAX = 1 << 16


def _scalar(data: bytes, pos: int, limit: int, out: List[bytes]) -> int:
    """Decode up to ``limit`` elements one by one into ``out``; returns the new position.
    (``data`` is ``bytes``: slicing it gives the element directly.)"""
    unpack = _U32.unpack_from
    append = out.append
    end = len(data)
    while pos < end and limit > 0:
        if pos + 4 > end:
            raise BytesTensorError("Invalid bytes tensor data: incomplete length field")
        (n,) = unpack(data, pos)
        pos += 4
        nxt = pos + n
        if nxt > end:
            raise BytesTensorError("Invalid bytes tensor data: string extends beyond buffer")
        append(data[pos:nxt])
        pos = nxt
        limit -= 1
    return pos


_RECORD_DTYPES: dict = {}


def _record_dtype(n: int) -> np.dtype:
    dt = _RECORD_DTYPES.get(n)
    if dt is None:
        fields = [("n", "<u4"), ("s", f"V{n}")] if n else [("n", "<u4")]
        dt = np.dtype(fields)
        if len(_RECORD_DTYPES) < 1024:
            _RECORD_DTYPES[n] = dt
    return dt


# A small tensor (a prompt, a few labels) skips the run detection: its numpy calls cost
# more than slicing a few elements out of ``bytes`` (n=1: 2.2 vs 4.8 us; n=32: 6.7 vs 8.4).
_SMALL_BYTES = 1024
_SMALL_COUNT = 32


def _decode_small(data: bytes, count: Optional[int]) -> np.ndarray:
    end = len(data)
    items: Optional[List[bytes]] = None
    if end >= 4:
        (width,) = _U32.unpack_from(data, 0)
        stride = 4 + width
        if end % stride == 0:
            # Equally long elements: cut them out by position, then check the guess in C
            # (the re-serialized slices must give back exactly ``data``). ``end + 1``:
            # with empty elements the last one starts at ``end``.
            guess = [data[i : i + width] for i in range(4, end + 1, stride)]
            head = data[:4]
            if head + head.join(guess) == data:
                items = guess
    if items is None:
        items = []
        _scalar(data, 0, end, items)  # at most one element per 4 bytes: all of them
    if count is not None and len(items) != count:
        raise BytesTensorError(
            f"Invalid bytes tensor data: expected {count} elements, found {len(items)}"
        )
    return to_object_array(items)


def _decode_native(lib: Any, mv: memoryview, count: Optional[int]) -> np.ndarray:
    """Any mix of lengths (UV-11): C finds the elements (a sequential scan), copies them
    into a zero-padded matrix, and numpy makes the bytes objects in one call."""
    a = np.frombuffer(mv, np.uint8)
    size = a.size
    cap = size // 4 if count is None else count
    starts = np.empty(cap, np.uint64)
    lens = np.empty(cap, np.uint32)
    addr = a.ctypes.data if size else None
    n = lib.pb_bytes_index(addr, size, starts.ctypes.data, lens.ctypes.data, cap)
    if n > cap:  # more elements than ``count``: scan them all for the message
        _count_error(count, _decode_native(lib, mv, None).size)
    if n == -1:
        raise BytesTensorError("Invalid bytes tensor data: incomplete length field")
    if n == -2:
        raise BytesTensorError("Invalid bytes tensor data: string extends beyond buffer")
    if count is not None and n != count:
        _count_error(count, n)
    starts, lens = starts[:n], lens[:n]
    width = int(lens.max()) if n else 0
    if width == 0:
        out = np.empty(n, dtype=np.object_)
        out.fill(b"")
        return out
    if int(lens.min()) == width:
        # All equally long: the data already is a matrix of (length, bytes) records.
        return a.view(_record_dtype(width))["s"].astype(np.object_)
    if n * width > _PAD_SLACK * size + (1 << 16):
        # One long element among many short ones: no padded matrix, slices of a copy.
        data = mv.tobytes()
        return to_object_array([data[s : s + k] for s, k in zip(starts.tolist(), lens.tolist())])
    mat = np.empty((n, width), np.uint8)
    trailing_nul = lib.pb_bytes_pad(
        addr, starts.ctypes.data, lens.ctypes.data, n, width, mat.ctypes.data
    )
    out = mat.view(f"S{width}").reshape(n).astype(np.object_)
    if not trailing_nul:
        return out
    # ``S`` items lose trailing NULs when they become bytes: put those elements back whole.
    # (starts >= 4, so the index of an empty element's "last byte" stays in range.)
    nul = np.flatnonzero((lens > 0) & (a[starts + lens - 1] == 0))
    for i in nul.tolist():
        s = int(starts[i])
        out[i] = mv[s : s + int(lens[i])].tobytes()
    return out


def _count_error(count: Optional[int], found: int) -> NoReturn:
    raise BytesTensorError(f"Invalid bytes tensor data: expected {count} elements, found {found}")


def decode_object_array(buf: Any, count: Optional[int] = None) -> np.ndarray:
    """Serialized BYTES data as a 1-D ``np.object_`` array of ``bytes`` (each element a
    copy, so the result does not pin ``buf``); ``count``, when known, must match."""
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    if mv.nbytes <= _SMALL_BYTES or (count is not None and count <= _SMALL_COUNT):
        return _decode_small(buf if type(buf) is bytes else mv.tobytes(), count)
    if native.helpers is not None:
        return _decode_native(native.helpers, mv, count)
    a = np.frombuffer(mv, np.uint8)
    end = a.size
    pieces: List[Any] = []  # numpy object arrays (runs) and lists (loop stretches)
    loose: List[bytes] = []
    pos = 0
    probe = _PROBE_FIRST
    stretch = _SCALAR_FIRST
    unpack = _U32.unpack_from
    data: Optional[bytes] = buf if type(buf) is bytes else None
    while pos < end:
        if pos + 4 > end:
            raise BytesTensorError("Invalid bytes tensor data: incomplete length field")
        (n,) = unpack(mv, pos)
        stride = 4 + n
        k = min((end - pos) // stride, probe)
        run = 0
        if k >= _MIN_RUN:
            # One record per element: the u32 length, then the bytes (no copy, strided).
            records = a[pos : pos + k * stride].view(_record_dtype(n))
            bad = np.flatnonzero(records["n"] != n)
            run = int(bad[0]) if bad.size else k
        if run >= _MIN_RUN:
            if loose:
                pieces.append(loose)
                loose = []
            if n == 0:
                piece = np.empty(run, dtype=np.object_)
                piece.fill(b"")
            else:
                piece = records["s"][:run].astype(np.object_)
            pieces.append(piece)
            pos += run * stride
            if run == k:
                probe *= 2
                stretch = _SCALAR_FIRST
                continue
            probe = _PROBE_FIRST
        if data is None:
            data = mv.tobytes()  # one memcpy; then elements are plain bytes slices
        pos = _scalar(data, pos, stretch, loose)
        if run < _MIN_RUN:
            stretch = min(stretch * 2, _SCALAR_MAX)
    if loose:
        pieces.append(loose)
    total = sum(len(p) for p in pieces)
    if count is not None and total != count:
        raise BytesTensorError(
            f"Invalid bytes tensor data: expected {count} elements, found {total}"
        )
    if len(pieces) == 1 and isinstance(pieces[0], np.ndarray):
        return pieces[0]
    out = np.empty(total, dtype=np.object_)
    i = 0
    for p in pieces:
        out[i : i + len(p)] = p
        i += len(p)
    return out


def deserialize_bytes_tensor(encoded_tensor: Any) -> np.ndarray:
    """pb_utils.deserialize_bytes_tensor: a 1-D ``np.object_`` array of ``bytes``."""
    return decode_object_array(encoded_tensor)
