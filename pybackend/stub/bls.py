"""BLS in the stub: ``InferenceRequest.exec``/``async_exec`` (spec 4.6).

A call sends BLS_EXEC on the async channel with a fresh call id and waits for its
BLS_RESPONSEs, which the reader thread turns into ``InferenceResponse`` objects (outputs
are zero-copy views of the backend's arena, returned with FREE when garbage-collected).
The waiting caller blocks only itself: the reader keeps serving every other message, so
any number of calls may be in flight from threads and coroutines at once.

On sync: a blocking, non-decoupled ``exec()`` made by the main thread inside ``execute``
(the common BLS model) goes on the sync channel instead. The backend's instance thread,
which waits there for RESULT anyway, starts the request and the answer comes back on
sync as one BLS_RESPONSE flagged FINAL, read by the caller itself: no hop through the
backend's monitor thread, the reader thread and a queue between two Python threads
(about a third of a BLS request's time; benchmarks/RESULTS.md).
"""

from __future__ import annotations

import itertools
import queue
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..ipc.bls_codec import UNDELIVERED, BlsExecDesc, decode_bls_response, encode_bls_exec
from ..ipc.channel import Message
from ..ipc.codec import GpuRef, ProtocolError, ResponseDesc, TensorDesc
from ..ipc.protocol import Location, MessageKind
from ..utils.errors import ErrorCode, TritonError, TritonModelException
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .logging import WARNING
from .outputs import Placer
from .state import StubState

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL
# The original's refusal of BLS from finalize (spec 2.3); the offline harness raises it too.
BLS_ONLY_IN_EXECUTE = "BLS is only supported during the 'execute' function."
_EMPTY = np.empty(0, np.uint8)


class UndeliveredResponse(InferenceResponse):
    """An error response the backend made because the callee's outputs found no room in this
    stub's shared memory: a ResponseIterator yields it even before the final one (the
    callee's own errors there are dropped, as by the original), so no response goes missing
    without the model seeing it."""

    __slots__ = ()


class _Call:
    """One BLS request in flight: the responses received so far, in order. The reader
    thread puts them in a C-level SimpleQueue, the cheapest hand-off to a waiting thread."""

    __slots__ = ("client", "cid", "lock", "items", "final", "waiter")

    def __init__(self, client: "BlsClient", waiter: Optional[Callable[[], None]]) -> None:
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


def _first_response(call: _Call) -> InferenceResponse:
    """What a non-decoupled call returns: the callee's response (a FINAL flag that comes
    alone after it is not waited for; one with no response at all yields an empty one)."""
    resp, _final = call.take()
    return resp if resp is not None else InferenceResponse()


class ResponseIterator:
    """The responses of a decoupled BLS call, as they stream in. Iteration ends after the
    response flagged final (which may carry no outputs). As in the original, a new loop over
    an iterator that was read to its end replays every response; one over an iterator left
    mid-way (a ``break``) goes on from there."""

    def __init__(self, call: _Call) -> None:
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


class BlsClient:
    def __init__(self, state: StubState) -> None:
        self.state = state
        self._ids = itertools.count(1)
        self._calls: Dict[int, _Call] = {}
        self._lock = threading.Lock()
        state.handlers[MessageKind.BLS_RESPONSE] = self._on_response
        state.dead_hooks.append(self._fail_all)

    def warn(self, text: str) -> None:
        """A warning about a call, in the server's log as the model's own would be."""
        self.state.log.here(WARNING, text)

    # ------------------------------------------------------------------ API

    def exec(self, request: InferenceRequest, decoupled: bool) -> Any:
        st = self.state
        if not decoupled and st.sync_calls and threading.get_ident() == st.main_ident:
            return self._exec_on_sync(request)
        call = self._start(request, decoupled, None)
        if decoupled:
            return ResponseIterator(call)
        return _first_response(call)

    def async_exec(self, request: InferenceRequest, decoupled: bool) -> "asyncio.Future[Any]":
        import asyncio  # here, not at import time: asyncio costs ~15 ms of stub start

        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[Any]" = loop.create_future()
        holder: List[_Call] = []

        # Both kinds resolve when the first response (or the final flag) is here, as the
        # original's does: it runs exec() in an executor thread, and a decoupled exec()
        # returns its ResponseIterator once the first response arrived. So a model that
        # iterates it with a plain `for` (NVIDIA's qa async_execute_decouple_bls) does not
        # block the event loop for a callee that answers in one response.
        def settle() -> None:
            if fut.done() or not holder:
                return
            call = holder[0]
            if not call.ready():
                return
            if call.waiter is wake:
                call.waiter = None  # a ResponseIterator's `async for` sets its own
            fut.set_result(ResponseIterator(call) if decoupled else _first_response(call))

        def wake() -> None:
            if not fut.done():
                try:
                    loop.call_soon_threadsafe(settle)
                except RuntimeError:
                    pass  # the loop is closed: nobody awaits this call any more

        call = self._start(request, decoupled, wake)
        holder.append(call)
        settle()  # a quick answer may already be here
        return fut

    def cancel(self, cid: int) -> None:
        try:
            self.state.async_.send(MessageKind.BLS_CANCEL, b"", cid)
        except OSError:
            pass  # the backend is gone: the call fails anyway

    # ------------------------------------------------------------------ sending

    def _start(
        self, request: InferenceRequest, decoupled: bool, waiter: Optional[Callable[[], None]]
    ) -> _Call:
        placed = self._place(request, decoupled)
        if isinstance(placed, InferenceResponse):
            call = _Call(self, waiter)
            call.push(placed, True)
            return call
        return self._send_call(*placed, waiter)

    def forward(self, desc: BlsExecDesc, waiter: Optional[Callable[[], None]]) -> _Call:
        """Start a call that a forked child of this process asked for (fork_route.py): its
        inputs came inline and are placed here like the inputs of a call of our own."""
        tensors = []
        for td in desc.inputs:
            data = td.data
            if isinstance(data, GpuRef):
                # CUDA does not survive fork(): a child cannot have made a GPU tensor of its own.
                call = _Call(self, waiter)
                call.push(
                    _error_response(
                        f"input '{td.name}' of the request to model '{desc.model_name}' is a "
                        "GPU tensor, which a forked process cannot send (CUDA does not work "
                        "after fork()): send it from the stub process, or as a CPU tensor"
                    ),
                    True,
                )
                return call
            buf = np.frombuffer(data or b"", np.uint8)
            tensors.append(Tensor._from_buffer(td.name, td.dtype, td.dims, buf))
        placer = Placer(self.state, for_send=True)
        try:
            desc.inputs = [placer.tensor(t) for t in tensors]
        except MemoryError as e:
            placer.abort()
            call = _Call(self, waiter)
            call.push(_no_room(desc.model_name, e), True)
            return call
        except BaseException:
            placer.abort()
            raise
        return self._send_call(placer, _encode(placer, desc), waiter)

    def _send_call(
        self, placer: Placer, body: bytearray, waiter: Optional[Callable[[], None]]
    ) -> _Call:
        call = _Call(self, waiter)
        cid = call.cid = next(self._ids)
        with self._lock:
            self._calls[cid] = call
        try:
            self.state.async_.send(MessageKind.BLS_EXEC, body, cid)
        except OSError as e:
            placer.abort()
            with self._lock:
                self._calls.pop(cid, None)
            call.push(_error_response(f"the backend is gone ({e})"), True)
        except BaseException:
            placer.abort()
            with self._lock:
                self._calls.pop(cid, None)
            raise
        return call

    def _exec_on_sync(self, request: InferenceRequest) -> InferenceResponse:
        """The call on sync (module docstring): sent, then this thread reads the sync channel
        until the answer, handling the segment and FREE messages that may come before it."""
        st = self.state
        placed = self._place(request, False)
        if isinstance(placed, InferenceResponse):
            return placed
        placer, body = placed
        cid = next(self._ids)
        try:
            st.sync.send_fast(MessageKind.BLS_EXEC, body, cid)
        except BaseException:
            placer.abort()
            raise
        first: Optional[InferenceResponse] = None
        while True:
            msg = st.sync.recv()
            if msg.kind == MessageKind.BLS_RESPONSE and msg.id == cid:
                final, resp = self._decode(msg)
                if first is None:
                    first = resp
                if final:
                    return first if first is not None else InferenceResponse()
            elif not st.handle_common(msg):
                raise ProtocolError(
                    f"message kind {msg.kind} (id {msg.id}) on the sync channel while waiting "
                    f"for the answer to BLS call {cid}"
                )

    def _place(
        self, request: InferenceRequest, decoupled: bool
    ) -> "Tuple[Placer, bytearray] | InferenceResponse":
        """The inputs placed and the BLS_EXEC body, or the error response of a request whose
        inputs do not fit in shared memory."""
        placer = Placer(self.state, for_send=True)
        try:
            inputs = [placer.tensor(t) for t in request._inputs]
        except MemoryError as e:
            # Shared memory exhausted: a failure of this request, returned like the others.
            placer.abort()
            return _no_room(request._model_name, e)
        except BaseException:
            placer.abort()
            raise
        return placer, _encode(placer, exec_desc(request, decoupled, inputs))

    # ------------------------------------------------------------------ receiving (reader)

    def _on_response(self, msg: Message) -> None:
        # Runs on the reader thread, which must survive whatever happens here.
        try:
            self._deliver(msg)
        except Exception as e:  # noqa: BLE001 - logged; the reader keeps serving
            self.state.log.here(WARNING, f"pybackend stub: BLS response {msg.id} dropped: {e}")

    def _deliver(self, msg: Message) -> None:
        try:
            final, resp = self._decode(msg)
        except ProtocolError as e:
            self.state.log.here(WARNING, f"pybackend stub: bad BLS_RESPONSE: {e}")
            return
        with self._lock:
            call = self._calls.pop(msg.id, None) if final else self._calls.get(msg.id)
        if call is not None:
            call.push(resp, final)

    def _decode(self, msg: Message) -> Tuple[bool, Optional[InferenceResponse]]:
        """(is_final, response or None) of a BLS_RESPONSE."""
        owned = bytearray(msg.body)  # inline outputs view it; the channel reuses its buffer
        flags, desc = decode_bls_response(owned)
        resp = None if desc is None else self._response(desc)
        if resp is not None and flags & UNDELIVERED and resp.has_error():
            resp = UndeliveredResponse(error=resp.error())
        return bool(flags & FINAL), resp

    def _response(self, desc: ResponseDesc) -> InferenceResponse:
        if desc.error is not None:
            code, message = desc.error
            if not 0 <= code <= ErrorCode.CANCELLED:
                code = ErrorCode.INTERNAL
            return InferenceResponse(error=TritonError(message, ErrorCode(code)))
        tensors = []
        done = 0
        try:
            for td in desc.outputs:
                tensors.append(self._tensor(td))
                done += 1
        except Exception as e:  # noqa: BLE001 - a bad output fails this response only
            # The failed one returned its own; those after it were never wrapped.
            self.state.ledger.give_back_unwrapped(desc.outputs[done + 1 :])
            return _error_response(f"cannot read the BLS response: {e}")
        return InferenceResponse._received(tensors, desc.parameters)

    def _tensor(self, td: TensorDesc) -> Tensor:
        n = td.byte_size
        if td.location == Location.INLINE:
            buf = np.frombuffer(td.data, np.uint8) if n else _EMPTY  # type: ignore[arg-type]
            return Tensor._from_buffer(td.name, td.dtype, td.dims, buf)
        if td.location == Location.GPU_IPC:  # preferred_memory GPU: lent until the tensor dies
            ref: Any = td.data
            try:
                on_gpu = self.state.ledger.map_gpu(ref, n)
            except BaseException:
                if ref.hold:
                    self.state.ledger.give_back_hold(ref.hold)
                raise
            return Tensor._on_device(td.name, td.dtype, td.dims, on_gpu)
        if td.location != Location.BACKEND_ARENA:
            raise ProtocolError(f"output '{td.name}' has location {td.location}")
        name, dtype, dims = td.name, td.dtype, td.dims
        ledger = self.state.ledger
        try:
            return ledger.wrap(
                td.seg, td.offset, n, lambda buf: Tensor._from_buffer(name, dtype, dims, buf)
            )
        except BaseException:
            ledger.give_back_unwrapped([td])  # nothing holds its block (if it names one)
            raise

    def _fail_all(self) -> None:
        with self._lock:
            calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.push(_error_response("the backend closed the channel"), True)


def exec_desc(request: InferenceRequest, decoupled: bool, inputs: List[TensorDesc]) -> BlsExecDesc:
    """The BLS_EXEC description of ``request`` with its inputs already placed."""
    pm = request._preferred_memory
    return BlsExecDesc(
        request._model_name,
        request._model_version,
        decoupled,
        request._request_id,
        request._correlation_id,
        request._flags,
        request._timeout,
        int(pm.preferred_memory_type) if pm is not None else 2,
        pm.preferred_device_id if pm is not None else 0,
        request._parameters if request._parameters != "{}" else "",
        list(request._requested),
        inputs,
        request._trace._token if request._trace is not None else 0,
    )


def _encode(placer: Placer, desc: BlsExecDesc) -> bytearray:
    try:
        return encode_bls_exec(desc)
    except BaseException:
        placer.abort()
        raise


def _no_room(model_name: str, e: MemoryError) -> InferenceResponse:
    return _error_response(
        f"the inputs of the request to model '{model_name}' do not fit in shared memory: {e}"
    )


def _error_response(text: str) -> InferenceResponse:
    return InferenceResponse(error=TritonError(f"BLS request failed: {text}", ErrorCode.INTERNAL))


def require_client(client: Optional[BlsClient]) -> BlsClient:
    if client is None:
        raise TritonModelException("BLS requests are not available before the stub is ready.")
    return client
