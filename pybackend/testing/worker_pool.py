"""The daemon threads the offline engines' bounded waits run their calls on
(harness_bounds.Worker), kept for the next call instead of started per call: starting and
joining a thread cost about 130 µs on an idle 2-vCPU machine and milliseconds on a loaded
one, more than the in-process call itself. A thread whose call a timeout gave up on stays in
that call until it returns, and only then is kept again."""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable, List

#: The name a kept thread has between calls (each call names it after itself).
IDLE_NAME = "harness-worker (idle)"
#: Threads kept between calls; more ended once their call returns (concurrent calls).
MAX_IDLE = 4

_idle: List["PooledThread"] = []
_lock = threading.Lock()


class PooledThread:
    """One kept daemon thread: runs what :meth:`submit` hands it, one call at a time."""

    def __init__(self) -> None:
        self._calls: "queue.SimpleQueue[Callable[[], None]]" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=IDLE_NAME, daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[[], None]) -> None:
        """``fn()`` on this thread (which must not raise: a Worker's keeps what it raised)."""
        self._calls.put(fn)

    def _serve(self) -> None:
        while True:
            fn = self._calls.get()
            fn()
            # Not kept while idle: the call's closure holds its requests, which a model may
            # leave for their count to end (a dropped response sender is seen at once).
            del fn
            self.thread.name = IDLE_NAME
            with _lock:
                if len(_idle) >= MAX_IDLE:
                    return
                _idle.append(self)


def acquire() -> PooledThread:
    """An idle kept thread, or a new one."""
    with _lock:
        if _idle:
            return _idle.pop()
    return PooledThread()


def _forget_after_fork() -> None:
    # A forked child has none of its parent's threads: those kept would never run a call.
    global _lock
    _idle.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
