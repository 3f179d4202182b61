"""``async def execute`` run in the background, up to a configured number of batches at once
(UV-32).

The original runs a decoupled model's coroutine on the stub's event loop and returns at
once (any number in flight), and runs a default-mode coroutine to completion before the
next batch (one at a time). Both stay the defaults. The model config parameter
``PYBACKEND_ASYNC_EXECUTE_CONCURRENCY`` (an integer >= 1) sets how many batches of one
instance may be inside ``execute`` at once, in either mode:

* decoupled: the limit bounds the background coroutines (0 or unset: unbounded);
* default mode with a limit above 1: the coroutine runs in the background as well, the
  batch's RESULT leaves its requests open, and the coroutine's return value is delivered
  through the requests' response senders (one FINAL response each) with the same
  validation and error texts as the return path. A response sent afterwards through a
  request's sender is legal in default mode (spec 4.3), so Triton's one-response contract
  holds.

When the limit is reached the stub's main thread waits for a slot before it answers the
EXECUTE, so further batches queue in Triton's scheduler (backpressure), not in the stub.

``PYBACKEND_ASYNC_EXECUTE_CANCEL: "true"`` (UV-31) polls ``is_cancelled()`` of a running
coroutine's requests every 20 ms; once every request of the batch is cancelled (the client
cancelled or went away) the coroutine is cancelled, so ``asyncio.CancelledError`` is raised
at its current ``await``, and each request not yet finished ends with a CANCELLED error.
"""

from __future__ import annotations

import threading
import traceback
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from ..utils.errors import TritonError
from ..utils.request import InferenceRequest
from ..utils.response import FailedRequestResponse, InferenceResponse
from ..utils.senders import TRITONSERVER_RESPONSE_COMPLETE_FINAL
from .failures import failed_requests_text
from .logging import ERROR
from .parameters import ParameterError, parameter_value, switch_parameter
from .returns import (
    RESCHEDULED,
    RESPONSE,
    UNANSWERED,
    ReturnRefused,
    decoupled_return_text,
    judge_return,
    refused_by_async_decoupled,
)
from .tracebacks import exits_as_errors, format_exception

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import Dispatcher

PARAMETER = "PYBACKEND_ASYNC_EXECUTE_CONCURRENCY"
CANCEL_PARAMETER = "PYBACKEND_ASYNC_EXECUTE_CANCEL"
CANCEL_POLL_S = 0.02
CANCELLED_TEXT = (
    f"The client cancelled the request; its `async def execute` was cancelled ({CANCEL_PARAMETER})."
)


def cancel_on_client_cancel(model_config: str) -> bool:
    """PYBACKEND_ASYNC_EXECUTE_CANCEL: cancel a coroutine whose requests were all cancelled."""
    return switch_parameter(model_config, CANCEL_PARAMETER)


def concurrency_limit(model_config: str, decoupled: bool) -> int:
    """The configured limit; 0 means unbounded (decoupled default), 1 (default mode's
    default) means one batch at a time, run to completion inside EXECUTE."""
    default = 0 if decoupled else 1
    text = parameter_value(model_config, PARAMETER)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise ParameterError(
            f"model config parameter {PARAMETER} must be an integer >= 1 (how many batches "
            f"one instance runs in `async def execute` at once), found {text!r}"
        )
    return value


class AsyncExecutor:
    """Runs execute coroutines in the background under a semaphore of ``limit`` slots."""

    def __init__(self, dispatcher: "Dispatcher", limit: int, cancel: bool = False) -> None:
        self.d = dispatcher
        self.limit = limit
        self.cancel = cancel
        self._slots: Optional[threading.Semaphore] = threading.Semaphore(limit) if limit else None

    @property
    def background_default_mode(self) -> bool:
        return self.limit > 1

    def start(self, coro: Any, requests: List[InferenceRequest]) -> None:
        """Schedule ``coro`` (execute's coroutine for ``requests``); waits for a slot."""
        if self._slots is not None:
            self._slots.acquire()
        import asyncio

        try:
            fut = asyncio.run_coroutine_threadsafe(self._run(coro, requests), self.d.event_loop())
        except BaseException:
            self._release()
            raise
        fut.add_done_callback(self._done)

    def _release(self) -> None:
        if self._slots is not None:
            self._slots.release()

    def _done(self, fut: Any) -> None:
        self._release()
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:  # a bug of ours: _run handles the model's exceptions
            text = "".join(traceback.TracebackException.from_exception(exc).format())
            self.d.state.log.here(ERROR, f"pybackend stub: async execute failed: {text}")

    async def guarded(self, coro: Any, requests: List[InferenceRequest]) -> Tuple[bool, Any]:
        """``(False, result of coro)``; ``(True, None)`` when cancellation is on and the
        coroutine was cancelled because every request of its batch was cancelled."""
        coro = exits_as_errors(coro)
        if not self.cancel:
            return False, await coro
        import asyncio

        loop = asyncio.get_running_loop()
        task = loop.create_task(coro)
        watcher = loop.create_task(self._watch(task, requests))
        try:
            return False, await task
        except asyncio.CancelledError:
            if watcher.done() and not watcher.cancelled() and watcher.result():
                return True, None
            raise
        finally:
            watcher.cancel()

    async def _watch(self, task: Any, requests: List[InferenceRequest]) -> bool:
        import asyncio

        loop = asyncio.get_running_loop()

        def all_cancelled() -> bool:
            return all(r.is_cancelled() for r in requests)

        while not task.done():
            await asyncio.sleep(CANCEL_POLL_S)
            # is_cancelled() is a blocking round trip to the backend: not on the loop.
            if await loop.run_in_executor(None, all_cancelled) and not task.done():
                task.cancel()
                return True
        return False

    def cancelled_responses(self, requests: List[InferenceRequest]) -> List[InferenceResponse]:
        error = TritonError(CANCELLED_TEXT, TritonError.CANCELLED)
        return [FailedRequestResponse(error=error) for _ in requests]

    async def _run(self, coro: Any, requests: List[InferenceRequest]) -> None:
        try:
            cancelled, ret = await self.guarded(coro, requests)
            if cancelled:
                for req, resp in zip(requests, self.cancelled_responses(requests)):
                    sender = req.get_response_sender()
                    if not sender._closed:
                        self._send(sender, resp, TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            if self.d.decoupled:
                if ret is not None:
                    self._ended(requests, decoupled_return_text(self.d.instance))
            else:
                self._deliver(requests, ret)
        except Exception as e:  # noqa: BLE001 - model code may raise anything; guarded()
            # made what is no Exception one (ModelExit), but the loop's own cancellation
            if self.d.decoupled:
                self._ended(requests, format_exception(e))
            else:
                self._fail(requests, format_exception(e))

    # ------------------------------------------------------------------ default mode

    def _deliver(self, requests: List[InferenceRequest], ret: Any) -> None:
        """The return path's rules (stub/returns.py), answered through the senders."""
        try:
            verdicts = judge_return(ret, requests, False, self.d.instance, through_senders=True)
        except ReturnRefused as e:
            return self._fail(requests, str(e))
        for req, (verdict, what) in zip(requests, verdicts):
            if verdict == RESCHEDULED:
                self._fail(
                    [req],
                    f"request rescheduling needs {PARAMETER} = 1 (the batch was already "
                    "released when the coroutine asked for it)",
                )
            elif verdict == RESPONSE:
                self._send(req.get_response_sender(), what, TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif verdict == UNANSWERED:  # as on the return path: nobody could ever answer it
                self._fail([req], what)
            # else: left to the sender the model took; a dropped one is reported.

    # ------------------------------------------------------------------ decoupled mode

    def _ended(self, requests: List[InferenceRequest], message: str) -> None:
        """A decoupled coroutine raised or returned a value (``message``): logged, and the
        requests nobody can answer end with the error (stub/returns.py
        refused_by_async_decoupled). A sender the model took stays open, as on the original:
        a task or thread may still answer through it; if it is dropped without FINAL, its
        client gets this error."""
        self._fail(refused_by_async_decoupled(requests), message)
        text = failed_requests_text(self.d.instance, message)
        for req in requests:
            sender = req._sender
            if sender is not None and not sender._closed:
                self.d.state.fail_on_drop(sender, text)

    def _send(self, sender: Any, resp: Optional[InferenceResponse], flags: int) -> None:
        try:
            sender.send(resp, flags=flags)
        except Exception as e:  # noqa: BLE001 - e.g. the model already answered
            self.d.state.log.here(ERROR, failed_requests_text(self.d.instance, str(e)))

    def _fail(self, requests: List[InferenceRequest], message: str) -> None:
        text = failed_requests_text(self.d.instance, message)
        self.d.state.log.here(ERROR, text)
        error = FailedRequestResponse(error=TritonError(text))
        for req in requests:
            sender = req.get_response_sender()
            if not sender._closed:
                self._send(sender, error, TRITONSERVER_RESPONSE_COMPLETE_FINAL)
