"""Where each output tensor travels: referenced where it already lies in shared memory,
inline when small, otherwise copied once into our arena."""

from __future__ import annotations

from typing import Any, Collection, List, Optional

import numpy as np

from ..ipc.codec import ResponseDesc, TensorDesc
from ..ipc.protocol import MAX_INLINE_BODY, Location
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .state import StubState


class Placer:
    """Builds ResponseDescs for one outgoing message. ``keepalive`` collects the arrays
    a RESULT references in the backend's arena; they must outlive the backend's read."""

    __slots__ = ("state", "for_send", "budget", "keepalive")

    def __init__(self, state: StubState, for_send: bool) -> None:
        self.state = state
        self.for_send = for_send
        self.budget = MAX_INLINE_BODY // 2
        self.keepalive: List[Any] = []

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
        data = t._raw if t._raw is not None else t._array
        if isinstance(data, np.ndarray):
            n = data.nbytes
            if n == 0:
                return TensorDesc(t._name, t._dtype, Location.INLINE, t._shape, 0, data=b"")
            st = self.state
            addr = data.__array_interface__["data"][0]
            arena = st.arena
            if arena is not None:
                hit = arena.locate(addr, n)
                if hit is not None:
                    arena.incref(*hit)
                    return TensorDesc(t._name, t._dtype, Location.STUB_ARENA, t._shape, n, *hit)
            if not self.for_send:
                hit = st.peer.locate(addr, n)
                if hit is not None:
                    self.keepalive.append(data)
                    return TensorDesc(t._name, t._dtype, Location.BACKEND_ARENA, t._shape, n, *hit)
            mv = memoryview(data.reshape(-1)).cast("B")
        else:
            mv = memoryview(data)
            n = mv.nbytes
            if n == 0:
                return TensorDesc(t._name, t._dtype, Location.INLINE, t._shape, 0, data=b"")
        if n <= self.state.inline_threshold and n <= self.budget:
            self.budget -= n
            return TensorDesc(t._name, t._dtype, Location.INLINE, t._shape, n, data=mv)
        arena = self.state.arena
        assert arena is not None
        seg, off = arena.alloc(n)
        arena.write(seg, off, mv)
        return TensorDesc(t._name, t._dtype, Location.STUB_ARENA, t._shape, n, seg, off)
