"""Response senders left open after a decoupled ``async def execute`` raised, watched in
the offline harness as the stub watches them (stub/state.py ``fail_on_drop``): once the
request and its sender are both garbage-collected without FINAL, the client gets the
coroutine's error instead of waiting for a FINAL that can no longer come."""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, List

from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .harness_streams import SenderStreams
from .transport import FINAL


class DropWatch:
    """Open requests of ``streams`` whose error a dropped sender delivers."""

    def __init__(self, streams: SenderStreams) -> None:
        self._streams = streams
        self._lock = threading.RLock()  # a watched object may die while it is held
        self._alive: Dict[int, int] = {}  # token -> its watched objects still alive
        self._refs: Dict[int, List[Any]] = {}

    def watch(self, req: InferenceRequest, sender: object, error: InferenceResponse) -> None:
        """``req`` and its open ``sender``: ``error`` ends the request once both are gone."""
        token = req._token

        def dead(_ref: Any) -> None:
            with self._lock:
                left = self._alive.get(token, 0) - 1
                if left > 0:
                    self._alive[token] = left
                    return
                self._alive.pop(token, None)
                self._refs.pop(token, None)
            if not self._streams.completed(token):
                self._streams.on_token_send(token, error, FINAL)

        with self._lock:
            self._alive[token] = 2
            self._refs[token] = [weakref.ref(req, dead), weakref.ref(sender, dead)]
