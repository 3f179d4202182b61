"""Calls that Python allows on the main thread only, made there for an instance's thread of a
process that a model's instances share (PYBACKEND_INSTANCE_PROCESS=shared).

An instance's own stub runs ``initialize`` and ``execute`` on its process's main thread, so
model code (or a library it loads) may install signal handlers there: ``signal.signal``,
``signal.set_wakeup_fd`` (asyncio's ``loop.add_signal_handler``). On any other thread Python
refuses them with ``ValueError: signal only works in main thread of the main interpreter``.
Under ``shared`` each instance has a thread of its own, and the process's main thread only
waits for the backend's control datagrams (host.py): it makes those calls for the instances'
threads and answers each caller with the call's result or exception. Handlers are process
state, shared by the instances like module-level state; Python runs them on the main thread,
as in an instance's own stub.

The offline harness runs a model's code on worker threads while the test's main thread waits
for them: there the main thread makes those calls only while it waits (:meth:`serving`), and
a call made when it does not is Python's own (its refusal) instead of waiting for nobody.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import signal
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Iterator, Optional, Tuple

# Only the main thread's own work can delay a call (an instance's attach takes milliseconds).
CALL_TIMEOUT_S = 10.0
MAIN_THREAD_ONLY = ("signal", "set_wakeup_fd")

_Call = Tuple["Future[Any]", Callable[..., Any], Tuple[Any, ...], Any]


class MainThreadCalls:
    """Installs forwarding versions of :data:`MAIN_THREAD_ONLY` in :mod:`signal`; the main
    thread runs what was asked when :attr:`wake_fd` is readable (:meth:`run_pending`)."""

    def __init__(self, always: bool = True) -> None:
        """``always``: the main thread serves calls all the time (a shared process's host);
        else only inside :meth:`serving`."""
        self._calls: "queue.SimpleQueue[_Call]" = queue.SimpleQueue()
        self.wake_fd, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._always = always
        self._lock = threading.Lock()  # a call is queued only while someone will serve it
        self._waiter: Optional[threading.Event] = None  # set at each call while serving

    def install(self) -> None:
        for name in MAIN_THREAD_ONLY:
            setattr(signal, name, self._forwarding(getattr(signal, name)))

    def _forwarding(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                return original(*args, **kwargs)  # also a process that model.py forked
            answer: "Future[Any]" = Future()
            with self._lock:
                waiter = self._waiter
                if not self._always and waiter is None:  # nobody serves: Python's own answer
                    return original(*args, **kwargs)
                self._calls.put((answer, original, args, kwargs))
            if waiter is not None:
                waiter.set()
            try:
                os.write(self._wake_w, b"\0")
            except BlockingIOError:
                pass  # the pipe is full of wake-ups already: the main thread will look
            try:
                return answer.result(CALL_TIMEOUT_S)
            except FutureTimeout:  # not the builtin TimeoutError before Python 3.11
                raise TimeoutError(
                    f"signal.{original.__name__}() of thread '{threading.current_thread().name}'"
                    f" was not made by the process's main thread within {CALL_TIMEOUT_S:g} s"
                    " (PYBACKEND_INSTANCE_PROCESS=shared makes it there for instances)"
                ) from None

        return call

    @contextlib.contextmanager
    def serving(self, waiter: threading.Event) -> Iterator[None]:
        """On the main thread, while it waits on ``waiter``: other threads' calls are queued
        for it (each sets ``waiter``; :meth:`run_pending` makes them). What was queued when
        the wait ends is made before this returns."""
        with self._lock:
            self._waiter = waiter
        try:
            yield
        finally:
            with self._lock:
                self._waiter = None
            self.run_pending()

    def run_pending(self) -> None:
        """On the main thread: every call asked for so far."""
        if not self._always and self._calls.empty():
            # The offline harness's waits look here at every wake-up: with nothing asked,
            # no read (a shared process's host drains its wake-ups, which its select sees).
            return
        try:
            while os.read(self.wake_fd, 4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                answer, fn, args, kwargs = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                answer.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - the caller's to handle
                answer.set_exception(exc)


__all__ = ["CALL_TIMEOUT_S", "MAIN_THREAD_ONLY", "MainThreadCalls"]
