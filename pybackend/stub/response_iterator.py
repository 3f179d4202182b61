"""A BLS call in flight and what the model reads of it: the responses received so far
(:class:`Call`, fed by the reader thread), the first one for a plain ``exec()``, and the
:class:`ResponseIterator` a decoupled call returns (:func:`call_result`, the one rule for
which an ``exec()`` returns). The offline harness feeds the same
iterator (testing/bls_responses.py) instead of the backend."""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, List, Optional, Protocol, Tuple

from ..utils.response import InferenceResponse


class _Client(Protocol):
    """What a call asks of the client that started it (the stub's BlsClient, a forked
    child's, or the offline harness's stand-in)."""

    def cancel(self, cid: int) -> None: ...

    def warn(self, text: str) -> None: ...


class UndeliveredResponse(InferenceResponse):
    """An error response the backend made because the callee's outputs found no room in this
    stub's shared memory: a ResponseIterator yields it even before the final one (the
    callee's own errors there are dropped, as by the original), so no response goes missing
    without the model seeing it."""

    __slots__ = ()


class Call:
    """One BLS request in flight: the responses received so far, in order. The reader
    thread puts them in a C-level SimpleQueue, the cheapest hand-off to a waiting thread."""

    __slots__ = ("client", "cid", "lock", "items", "final", "waiter")

    def __init__(self, client: _Client, waiter: Optional[Callable[[], None]]) -> None:
        self.client = client
        self.cid = 0
        self.lock = threading.Lock()
        self.items: "queue.SimpleQueue[Tuple[Optional[InferenceResponse], bool]]" = (
            queue.SimpleQueue()
        )
        self.final = False
        self.waiter = waiter

    def push(self, resp: Optional[InferenceResponse], final: bool) -> None:
        with self.lock:
            if self.final:
                return
            self.final = final
            self.items.put((resp, final))
        waiter = self.waiter
        if waiter is not None:
            waiter()

    def take(self) -> Tuple[Optional[InferenceResponse], bool]:
        """The next (response, is_final), waiting for it."""
        return self.items.get()

    def ready(self) -> bool:
        return not self.items.empty()


def first_response(call: Call) -> InferenceResponse:
    """What a non-decoupled call returns: the callee's response (a FINAL flag that comes
    alone after it is not waited for; one with no response at all yields an empty one)."""
    resp, _final = call.take()
    return resp if resp is not None else InferenceResponse()


def call_result(call: Call, decoupled: bool) -> Any:
    """What ``exec()`` / ``async_exec()`` return for ``call``: a ResponseIterator for a
    decoupled call, else its first response."""
    return ResponseIterator(call) if decoupled else first_response(call)


class ResponseIterator:
    """The responses of a decoupled BLS call, as they stream in. Iteration ends after the
    response flagged final (which may carry no outputs). As in the original, a new loop over
    an iterator that was read to its end replays every response; one over an iterator left
    mid-way (a ``break``) goes on from there."""

    def __init__(self, call: Call) -> None:
        self._call = call
        self._cache: List[InferenceResponse] = []
        self._pos = 0
        self._done = False

    def __iter__(self) -> "ResponseIterator":
        if self._done and self._pos >= len(self._cache):
            self._pos = 0
        return self

    def __next__(self) -> InferenceResponse:
        while True:
            resp = self._step()
            if resp is not None:
                return resp

    def _step(self) -> Optional[InferenceResponse]:
        """The next response (waiting for it), or None when the one that came was dropped."""
        if self._pos < len(self._cache):
            self._pos += 1
            return self._cache[self._pos - 1]
        if self._done:
            raise StopIteration
        resp, final = self._call.take()
        if resp is None:
            resp = InferenceResponse()
        elif not final and resp.has_error() and not isinstance(resp, UndeliveredResponse):
            self._drop(resp)
            return None
        if final:
            self._done = True
        self._cache.append(resp)
        self._pos += 1
        return resp

    def _drop(self, resp: InferenceResponse) -> None:
        # The original's BLS stream never yields a callee's error response that is not
        # final (measured: tests/conformance/stream_probe), and model code written for it
        # may read every response's outputs; so it is dropped here too, but not silently.
        error = resp.error()
        text = (
            "pybackend stub: a decoupled BLS call dropped an error response the callee sent "
            f"before its final one, as Triton's original Python backend does: "
            f"{error.message() if error is not None else ''}"
        )
        self._call.client.warn(text)

    # pybackend extension: `async for` waits for each response without blocking the event
    # loop, so other coroutines of the instance keep running while a stream trickles in.
    def __aiter__(self) -> "ResponseIterator":
        return self.__iter__()

    async def __anext__(self) -> InferenceResponse:
        while True:
            if self._pos >= len(self._cache) and not self._done and not self._call.ready():
                await self._arrival()
            try:
                resp = self._step()  # does not block now
            except StopIteration:
                raise StopAsyncIteration from None
            if resp is not None:
                return resp

    async def _arrival(self) -> None:
        """Until the call has a response to take, without blocking the event loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        arrived = loop.create_future()

        def settle() -> None:
            if not arrived.done():
                arrived.set_result(None)

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:
                pass  # the loop is closed: nobody awaits this any more

        self._call.waiter = wake
        try:
            if not self._call.ready():  # a response may have come before the waiter
                await arrived
        finally:
            self._call.waiter = None

    def cancel(self) -> None:
        """Ask the server to cancel the call (no-op once it finished)."""
        if not self._done and not self._call.final:
            self._call.client.cancel(self._call.cid)
