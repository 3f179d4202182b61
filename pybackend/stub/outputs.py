"""Where each output tensor travels: referenced where it already lies in shared memory,
inline when small, otherwise copied once into our arena.

:meth:`Placer.response` writes the encoded ResponseBody (docs/protocol.md) directly, so
the hot path builds no intermediate ``ResponseDesc``/``TensorDesc`` objects; the codec
splices the bytes into RESULT or SEND as they are.
"""

from __future__ import annotations

import struct
from typing import Any, Collection, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..ipc.codec import (
    BLOCK_REF,
    ERROR_HEAD,
    FAILURE,
    GPU_REF,
    MODEL_ERROR,
    U32,
    TensorDesc,
    put_str,
)
from ..ipc.protocol import MAX_INLINE_BODY, Location
from ..utils.dlpack import DeviceBuffer
from ..utils.response import FailedRequestResponse, InferenceResponse
from ..utils.tensor import Tensor
from .gpu import stage_to_host
from .state import StubState

_INLINE = int(Location.INLINE)
_STUB_ARENA = int(Location.STUB_ARENA)
_BACKEND_ARENA = int(Location.BACKEND_ARENA)
_GPU_IPC = int(Location.GPU_IPC)
_OK_HEAD = b"\x00"
_EMPTY_PARAMS = b"\x00" + U32.pack(0)  # no error, parameters ""

# u8 dtype, u8 location, u32 ndim, i64 dims[ndim], u64 byte_size: one Struct per rank.
_HEADS: Dict[int, struct.Struct] = {}
# Encoded tensor names (u32 length + UTF-8): outputs keep their names from call to call.
_NAMES: Dict[str, bytes] = {}
# Name and head of inline tensors by (name, dtype, shape, byte size): a streaming model sends
# the same small output thousands of times, and the head is then one lookup.
_INLINE_HEADS: Dict[Tuple[str, int, Tuple[int, ...], int], bytes] = {}


def _head(ndim: int) -> struct.Struct:
    s = _HEADS.get(ndim)
    if s is None:
        s = _HEADS[ndim] = struct.Struct(f"<BBI{ndim}qQ")
    return s


def _name(name: str) -> bytes:
    b = _NAMES.get(name)
    if b is None:
        raw = name.encode("utf-8", "surrogateescape")
        b = U32.pack(len(raw)) + raw
        if len(_NAMES) < 4096:
            _NAMES[name] = b
    return b


def _bytes_view(data: Any) -> memoryview:
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


class Placer:
    """Encodes the responses of one outgoing message. ``keepalive`` collects the arrays
    a RESULT references in the backend's arena; they must outlive the backend's read."""

    __slots__ = ("state", "for_send", "budget", "keepalive", "blocks", "pinned", "holds")

    def __init__(
        self,
        state: StubState,
        for_send: bool,
        pinned: Sequence[Tuple[int, int, int]] = (),
    ) -> None:
        self.state = state
        self.for_send = for_send
        # (seg, offset, size) of backend blocks the backend holds until it has read the
        # message (the batch's inputs): references into them need no keepalive.
        self.pinned = pinned
        self.budget = MAX_INLINE_BODY // 2
        self.keepalive: List[Any] = []
        self.blocks: List[Tuple[int, int]] = []  # our references, dropped by abort()
        self.holds: List[int] = []  # GPU outputs held for the backend, dropped by abort()

    def abort(self) -> None:
        """The message will not be sent: give back the references taken for it."""
        blocks, self.blocks = self.blocks, []
        holds, self.holds = self.holds, []
        self.state.ledger.not_sent(blocks, holds)
        self.keepalive = []

    def response(
        self, resp: InferenceResponse, requested: Optional[Collection[str]], head: bytes = b""
    ) -> bytearray:
        """The encoded ResponseBody of ``resp`` (only the ``requested`` outputs, when
        given), with every output tensor placed, after ``head`` (a SEND's own head: the
        body is built in place instead of being copied into the message afterwards)."""
        out = bytearray(head)
        self.write_response(out, resp, requested)
        return out

    def write_response(
        self, out: bytearray, resp: InferenceResponse, requested: Optional[Collection[str]]
    ) -> None:
        """:meth:`response`, appended to ``out`` (a RESULT being written)."""
        err = resp._error
        params = resp._parameters
        if err is not None:
            out.append(FAILURE if isinstance(resp, FailedRequestResponse) else MODEL_ERROR)
            out += ERROR_HEAD.pack(int(err.code()))
            put_str(out, err.message())
            put_str(out, params)
            out += U32.pack(0)
            return
        outputs = resp._outputs
        if requested:
            outputs = [t for t in outputs if t._name in requested]
        if params:
            out += _OK_HEAD
            put_str(out, params)
        else:
            out += _EMPTY_PARAMS
        out += U32.pack(len(outputs))
        for t in outputs:
            self._tensor(out, t)

    def tensor(self, t: Tensor) -> TensorDesc:
        """``t`` placed, as a descriptor (for bodies encoded by the codec, e.g. BLS)."""
        loc, n, where = self._place(t)
        if loc == _INLINE:
            data = _bytes_view(where) if n else b""
            return TensorDesc(t._name, t._dtype, loc, t._shape, n, data=data)
        if loc == _GPU_IPC:
            return TensorDesc(t._name, t._dtype, loc, t._shape, n, data=where)
        return TensorDesc(t._name, t._dtype, loc, t._shape, n, *where)

    def _tensor(self, out: bytearray, t: Tensor) -> None:
        """``t`` placed and encoded onto ``out``."""
        loc, n, where = self._place(t)
        shape = t._shape
        if loc == _INLINE:
            key = (t._name, t._dtype, shape, n)
            head = _INLINE_HEADS.get(key)
            if head is None:
                head = _name(t._name) + _head(len(shape)).pack(t._dtype, loc, len(shape), *shape, n)
                if len(_INLINE_HEADS) < 4096:
                    _INLINE_HEADS[key] = head
            out += head
            if n:
                # memoryview: ``out += array`` would be numpy's broadcasting add.
                out += memoryview(where)
        else:
            out += _name(t._name)
            out += _head(len(shape)).pack(t._dtype, loc, len(shape), *shape, n)
            out += (GPU_REF if loc == _GPU_IPC else BLOCK_REF).pack(*where)

    def _place(self, t: Tensor) -> Tuple[int, int, Any]:
        """(location, byte size, the data itself when inline (bytes or a C-contiguous
        array) or (seg, offset)) for ``t``."""
        data: Any = t._raw if t._raw is not None else t._array
        if type(data) is DeviceBuffer:
            return self._place_gpu(data)
        is_array = isinstance(data, np.ndarray)
        n = data.nbytes if is_array else len(data)
        # Small tensors travel inline: a copy of a few KiB is cheaper than any lookup.
        if n == 0:
            return _INLINE, 0, b""
        if n <= self.state.inline_threshold and n <= self.budget:
            self.budget -= n
            return _INLINE, n, data
        st = self.state
        arena = st.arena
        assert arena is not None
        # Only a view can lie in shared memory (our arena: Tensor.empty; a backend block:
        # an input): an array that owns its data came from numpy's allocator, so the two
        # address lookups (a few µs of Python per output) are skipped for it.
        if is_array and data.base is not None:
            addr = data.__array_interface__["data"][0]
            hit = arena.locate(addr, n)
            if hit is not None:
                arena.incref(*hit)
                self.blocks.append(hit)
                return _STUB_ARENA, n, hit
            if not self.for_send:
                hit = st.peer.locate(addr, n)
                if hit is not None:
                    seg, off = hit
                    for pseg, poff, psize in self.pinned:
                        if seg == pseg and poff <= off and off + n <= poff + psize:
                            break
                    else:
                        self.keepalive.append(data)
                    return _BACKEND_ARENA, n, hit
        seg, off = arena.alloc(n)
        self.blocks.append((seg, off))
        arena.write(seg, off, _bytes_view(data))
        return _STUB_ARENA, n, (seg, off)

    def _place_gpu(self, buf: DeviceBuffer) -> Tuple[int, int, Any]:
        """A GPU tensor stays on the GPU: described by its CUDA IPC handle and held until
        the backend has copied it (stub/gpu.py). Where IPC cannot share it, it is staged
        through our arena (one device-to-host copy, UV-29)."""
        n = buf.nbytes
        if n == 0:
            return _INLINE, 0, b""
        ref = self.state.ledger.share_gpu(buf)
        if ref is not None:
            self.holds.append(ref.hold)
            return _GPU_IPC, n, ref
        arena = self.state.arena
        assert arena is not None
        seg, off = arena.alloc(n)
        self.blocks.append((seg, off))
        stage_to_host(buf, arena.buffer(seg, off, n).ctypes.data)
        return _STUB_ARENA, n, (seg, off)
