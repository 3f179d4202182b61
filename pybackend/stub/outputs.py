"""Where each output tensor travels: referenced where it already lies in shared memory,
inline when small, otherwise copied once into our arena."""

from __future__ import annotations

from typing import Any, Collection, List, Optional, Tuple

import numpy as np

from ..ipc.codec import ResponseDesc, TensorDesc
from ..ipc.protocol import MAX_INLINE_BODY, Location
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .state import StubState


class Placer:
    """Builds ResponseDescs for one outgoing message. ``keepalive`` collects the arrays
    a RESULT references in the backend's arena; they must outlive the backend's read."""

    __slots__ = ("state", "for_send", "budget", "keepalive", "blocks")

    def __init__(self, state: StubState, for_send: bool) -> None:
        self.state = state
        self.for_send = for_send
        self.budget = MAX_INLINE_BODY // 2
        self.keepalive: List[Any] = []
        self.blocks: List[Tuple[int, int]] = []  # our references, dropped by abort()

    def abort(self) -> None:
        """The message will not be sent: give back the references taken for it."""
        arena = self.state.arena
        blocks, self.blocks = self.blocks, []
        for seg, off in blocks:
            arena.decref(seg, off)  # type: ignore[union-attr]
        self.keepalive = []

    def response(
        self, resp: InferenceResponse, requested: Optional[Collection[str]]
    ) -> ResponseDesc:
        err = resp._error
        if err is not None:
            return ResponseDesc((), resp._parameters, (int(err.code()), err.message()))
        outputs = resp._outputs
        if requested:
            outputs = [t for t in outputs if t._name in requested]
        return ResponseDesc([self.tensor(t) for t in outputs], resp._parameters)

    def tensor(self, t: Tensor) -> TensorDesc:
        data: Any = t._raw if t._raw is not None else t._array
        n = data.nbytes if isinstance(data, np.ndarray) else len(data)
        if n == 0:
            return TensorDesc(t._name, t._dtype, Location.INLINE, t._shape, 0, data=b"")
        # Small tensors travel inline: a copy of a few KiB is cheaper than any lookup.
        if n <= self.state.inline_threshold and n <= self.budget:
            self.budget -= n
            mv = memoryview(data)
            if mv.format != "B" or mv.ndim != 1:
                mv = mv.cast("B")
            return TensorDesc(t._name, t._dtype, Location.INLINE, t._shape, n, data=mv)
        st = self.state
        arena = st.arena
        assert arena is not None
        if isinstance(data, np.ndarray):
            addr = data.__array_interface__["data"][0]
            hit = arena.locate(addr, n)
            if hit is not None:
                arena.incref(*hit)
                self.blocks.append(hit)
                return TensorDesc(t._name, t._dtype, Location.STUB_ARENA, t._shape, n, *hit)
            if not self.for_send:
                hit = st.peer.locate(addr, n)
                if hit is not None:
                    self.keepalive.append(data)
                    return TensorDesc(t._name, t._dtype, Location.BACKEND_ARENA, t._shape, n, *hit)
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        seg, off = arena.alloc(n)
        self.blocks.append((seg, off))
        arena.write(seg, off, mv)
        return TensorDesc(t._name, t._dtype, Location.STUB_ARENA, t._shape, n, seg, off)
