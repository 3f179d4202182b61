"""The bounded waits of the offline engines, one rule for both (:func:`run_bounded`): a
client call of a :class:`~pybackend.testing.harness.ModelHarness` (and a StubModel's wait
for a RESULT) bounded by its ``timeout`` from the call's start, as the server bounds it for
a client, and a model's load bounded by ``initialize_timeout``, as the backend's
initialize-timeout-seconds bounds it where an operator sets it. The model runs on a worker
thread the caller waits for. Python cannot stop a thread, so an ``execute`` that outlives
the wait is cancelled (its ``request.is_cancelled()`` turns true, for a model that checks
it) and left running on its daemon thread, named in an :class:`ExecuteStillRunningWarning`;
until it returns the engine refuses new requests (:func:`still_running_text`,
abandoned_execute.py) instead of queueing them behind it forever. In a debug mode
(:func:`debugging`) nothing is bounded."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from typing import Any, Callable, Dict, Generic, Optional, TypeVar

from ..stub.main_thread import MainThreadCalls
from .worker_pool import acquire as kept_thread

T = TypeVar("T")

#: Seconds closing a model waits for its finalize: a StubModel's stub is killed then, an
#: in-process finalize is left on its thread (closing never hangs a test run).
STOP_TIMEOUT_S = 10.0

#: Seconds a call (``infer``, ``infer_batch``, ``execute``, ``infer_stream``) waits for its
#: answer by default, counted from its start, ``execute`` included (``timeout=``).
CALL_TIMEOUT_S = 30.0

#: Seconds a model's load may take at ``start`` by default (``initialize_timeout=``). The
#: server puts no bound on a load unless its operator sets ``initialize-timeout-seconds`` (the
#: original has none: weights may load for minutes); a test keeps one, so that an
#: ``initialize`` that hangs fails the test instead of hanging it, and a generous one.
INITIALIZE_TIMEOUT_S = 300.0


class ExecuteStillRunningWarning(RuntimeWarning):
    """A model's ``execute`` outlived the caller's timeout and runs on, on its thread."""


def still_running_warning(model_name: str, instance_name: str, timeout: float, thread: str) -> str:
    return (
        f"execute of model '{model_name}' (instance '{instance_name}') did not end within "
        f"timeout={timeout:g} s: its request is cancelled (request.is_cancelled() is True) "
        f"and it runs on in daemon thread '{thread}', as Python cannot stop a thread; the "
        "harness refuses new requests until it returns (check is_cancelled() in long "
        "loops, or use StubModel(execute_timeout=...), which kills the stub)"
    )


def still_running_text(
    model_name: str, instance_name: str, thread: str, engine: str = "ModelHarness"
) -> str:
    return (
        f"execute of model '{model_name}' (instance '{instance_name}') still runs in thread "
        f"'{thread}' after its caller's timeout: the {engine} refuses new requests until it "
        f"returns; let the model stop on request.is_cancelled(), or start a new {engine}"
    )


def stub_still_running_warning(
    model_name: str, instance_name: str, timeout: float, thread: str
) -> str:
    return (
        f"execute of model '{model_name}' (instance '{instance_name}') did not end within "
        f"timeout={timeout:g} s: its request is cancelled (request.is_cancelled() is True) "
        f"and it runs on in the stub process, its RESULT awaited by daemon thread "
        f"'{thread}'; the StubModel refuses new requests until it returns (check "
        "is_cancelled() in long loops, or pass execute_timeout=..., which kills the stub)"
    )


def initialize_timed_out_text(
    model_name: str, instance_name: str, timeout: float, what: str, phase: str = "initialize"
) -> str:
    """A load that outlived ``initialize_timeout`` (``what``: what became of it)."""
    return (
        f"{phase} of model '{model_name}' (instance '{instance_name}') did not return within "
        f"initialize_timeout={timeout:g} s: the load failed, as the backend fails a load that "
        f"outlives initialize-timeout-seconds where that is set; {what}. A model whose load "
        "is that slow: pass a larger initialize_timeout= (and raise the backend's "
        f"initialize-timeout-seconds if the server sets one); otherwise find what {phase} "
        "waits for"
    )


def finalize_still_running_warning(model_name: str, instance_name: str, thread: str) -> str:
    return (
        f"finalize of model '{model_name}' (instance '{instance_name}') did not return within "
        f"{STOP_TIMEOUT_S:g} s: the harness is closed, and finalize runs on in daemon thread "
        f"'{thread}', as Python cannot stop a thread (a StubModel kills its stub then)"
    )


class Worker(Generic[T]):
    """``fn()`` on a daemon thread of its own for the call (a kept one, worker_pool.py, named
    ``name`` while it runs ``fn``); :meth:`run` says whether it ended within the wait (else
    :attr:`thread` runs on), :meth:`result` gives what it returned."""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._fn: Optional[Callable[[], T]] = fn
        self._name = name
        self._result: Optional[T] = None
        self._error: Optional[BaseException] = None
        self._done = False
        self._wake = threading.Event()  # fn ended, or asks the main thread for a call
        #: The thread ``fn`` runs on (set by :meth:`run`).
        self.thread: threading.Thread = threading.current_thread()

    def _run(self) -> None:
        _local.worker = self
        try:
            self._result = self._fn()  # type: ignore[misc]
        except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
            self._error = e
        finally:
            self._fn = None  # its closure (the call's requests) ends with the call
            _local.worker = None
            self._done = True
            self._wake.set()

    def run(self, timeout: float) -> bool:
        """Start ``fn``; whether it ended within ``timeout`` seconds. On the main thread, which
        meanwhile makes the calls Python allows there only (``signal.signal``) for ``fn``, as
        a stub's model code runs on its main thread (serving from before ``fn`` starts)."""
        deadline = time.monotonic() + max(timeout, 0.0)
        pooled = kept_thread()
        self.thread = pooled.thread
        self.thread.name = self._name
        if threading.current_thread() is not threading.main_thread():
            pooled.submit(self._run)
            self._wake.wait(max(timeout, 0.0))
            return self._done
        calls = _main_thread_calls()
        with calls.serving(self._wake):
            pooled.submit(self._run)
            while True:
                self._wake.clear()
                calls.run_pending()
                left = deadline - time.monotonic()
                if self._done or left <= 0:
                    break
                self._wake.wait(left)
        return self._done

    def result(self) -> T:
        """What ``fn`` returned (its exception raised here, on the caller's thread)."""
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


_local = threading.local()  # .worker: the Worker whose fn runs on this thread


def current_worker() -> Optional[Worker[Any]]:
    """The :class:`Worker` whose ``fn`` runs on the calling thread, if any: a kept thread
    runs many calls, so a call is told apart by its Worker, not by its thread."""
    return getattr(_local, "worker", None)


def run_serving(start: Callable[[], None], done: "Future[Any]") -> None:
    """``start()``, which hands work to another thread, then wait (as long as it takes)
    until ``done``; on the main thread, which meanwhile makes the calls Python allows there
    only (``signal.signal``) for that work, as :meth:`Worker.run` does."""
    if threading.current_thread() is not threading.main_thread():
        start()
        futures_wait([done])
        return
    wake = threading.Event()
    done.add_done_callback(lambda _: wake.set())
    calls = _main_thread_calls()
    with calls.serving(wake):
        start()
        while True:
            wake.clear()
            calls.run_pending()
            if done.done():
                break
            wake.wait()


_calls: Optional[MainThreadCalls] = None
_calls_lock = threading.Lock()


def _main_thread_calls() -> MainThreadCalls:
    """The process's forwarding of main-thread-only calls, installed by the first wait."""
    global _calls
    with _calls_lock:
        if _calls is None:
            _calls = MainThreadCalls(always=False)
            _calls.install()
        return _calls


def run_bounded(
    fn: Callable[[], T],
    timeout: float,
    name: str,
    on_timeout: Callable[[Worker[T]], Exception],
    config: Optional[Dict[str, Any]] = None,
) -> T:
    """``fn()`` on a daemon worker thread ``name``, waited for at most ``timeout`` seconds:
    its result, or its exception raised here; past the wait, ``on_timeout(worker)`` (which
    decides what becomes of the thread still running) is raised. The one bounded wait of
    the offline engines' calls and loads; not bounded in the debug mode of ``config`` (the
    model's) or the environment."""
    if debugging(config=config):
        return fn()  # a breakpoint may stop it for as long as the developer takes
    worker = Worker(fn, name)
    if not worker.run(timeout):
        raise on_timeout(worker)
    return worker.result()


def debugging(debug: str = "", config: Optional[Dict[str, Any]] = None) -> bool:
    """Whether a debug mode is on (``debug``, a StubModel's, else the PYBACKEND_DEBUG of the
    model's ``config`` or of the environment, as the backend reads it): then, as the backend
    in debug mode, nothing is bounded, so a model stopped at a breakpoint is not given up on."""
    params = (config or {}).get("parameters") or {}
    value = debug or (params.get("PYBACKEND_DEBUG") or {}).get("string_value")
    if value is None:
        value = os.environ.get("PYBACKEND_DEBUG", "")
    return value not in ("", "off", "0")


def time_left(timeout: float, deadline: Optional[float]) -> float:
    """What is left of a wait of ``timeout`` seconds that ends at ``deadline`` (if any: a
    call's timeout counted from its start), for every offline engine."""
    return timeout if deadline is None else max(deadline - time.monotonic(), 0.0)
