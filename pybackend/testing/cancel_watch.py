"""A client's cancel at a moment of the test's choosing: when ``event`` is set, ``cancel``
runs once (the request's ``is_cancelled()`` turns true), until the request is over."""

from __future__ import annotations

import threading
from typing import Callable, Optional


class CancelWatch:
    """Watches ``event`` on a thread of its own while a request runs (a context manager)."""

    def __init__(self, event: Optional[threading.Event], cancel: Callable[[], None]) -> None:
        self._event = event
        self._cancel = cancel
        self._over = threading.Event()

    def __enter__(self) -> "CancelWatch":
        if self._event is not None:
            threading.Thread(target=self._watch, name="harness-cancel", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._over.set()

    @property
    def cancelled(self) -> bool:
        return self._event is not None and self._event.is_set()

    def _watch(self) -> None:
        assert self._event is not None
        while not self._over.is_set():
            if self._event.wait(0.02):
                if not self._over.is_set():
                    self._cancel()
                return
