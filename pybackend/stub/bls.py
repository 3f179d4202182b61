"""BLS in the stub: ``InferenceRequest.exec``/``async_exec`` (spec 4.6).

A call sends BLS_EXEC on the async channel with a fresh call id and waits for its
BLS_RESPONSEs, which the reader thread turns into ``InferenceResponse`` objects (outputs
are zero-copy views of the backend's arena, returned with FREE when garbage-collected;
bls_wire.py) and hands to the call (response_iterator.py). The waiting caller blocks only
itself: the reader keeps serving every other message, so any number of calls may be in
flight from threads and coroutines at once.

On sync: a blocking, non-decoupled ``exec()`` made by the main thread inside ``execute``
(the common BLS model) goes on the sync channel instead. The backend's instance thread,
which waits there for RESULT anyway, starts the request and the answer comes back on
sync as one BLS_RESPONSE flagged FINAL, read by the caller itself: no hop through the
backend's monitor thread, the reader thread and a queue between two Python threads
(about a third of a BLS request's time; benchmarks/RESULTS.md).
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..ipc.bls_codec import BlsExecDesc
from ..ipc.channel import Message
from ..ipc.codec import GpuRef, ProtocolError
from ..ipc.protocol import MessageKind
from ..utils import gpu_trace
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .bls_wire import decode_response, encode_exec, error_response, exec_desc, no_room
from .logging import WARNING
from .outputs import Placer
from .response_iterator import Call, call_result
from .state import StubState

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

# The original's refusal of BLS from finalize (spec 2.3); the offline harness raises it too.
BLS_ONLY_IN_EXECUTE = "BLS is only supported during the 'execute' function."


class BlsClient:
    def __init__(self, state: StubState) -> None:
        self.state = state
        self._ids = itertools.count(1)
        self._calls: Dict[int, Call] = {}
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
        return call_result(self._start(request, decoupled, None), decoupled)

    def async_exec(self, request: InferenceRequest, decoupled: bool) -> "asyncio.Future[Any]":
        import asyncio  # here, not at import time: asyncio costs ~15 ms of stub start

        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[Any]" = loop.create_future()
        holder: List[Call] = []

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
            fut.set_result(call_result(call, decoupled))

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
    ) -> Call:
        placed = self._place(request, decoupled)
        if isinstance(placed, InferenceResponse):
            call = Call(self, waiter)
            call.push(placed, True)
            return call
        return self._send_call(*placed, waiter)

    def forward(self, desc: BlsExecDesc, waiter: Optional[Callable[[], None]]) -> Call:
        """Start a call that a forked child of this process asked for (fork_route.py): its
        inputs came inline and are placed here like the inputs of a call of our own."""
        tensors = []
        for td in desc.inputs:
            data = td.data
            if isinstance(data, GpuRef):
                # CUDA does not survive fork(): a child cannot have made a GPU tensor of its own.
                call = Call(self, waiter)
                call.push(
                    error_response(
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
            call = Call(self, waiter)
            call.push(no_room(desc.model_name, e), True)
            return call
        except BaseException:
            placer.abort()
            raise
        return self._send_call(placer, encode_exec(placer, desc), waiter)

    def _send_call(
        self, placer: Placer, body: bytearray, waiter: Optional[Callable[[], None]]
    ) -> Call:
        call = Call(self, waiter)
        cid = call.cid = next(self._ids)
        with self._lock:
            self._calls[cid] = call
        try:
            self.state.async_.send(MessageKind.BLS_EXEC, body, cid)
        except OSError as e:
            placer.abort()
            with self._lock:
                self._calls.pop(cid, None)
            call.push(error_response(f"the backend is gone ({e})"), True)
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
        if gpu_trace.ON:
            t0 = gpu_trace.now()
        try:
            st.sync.send_fast(MessageKind.BLS_EXEC, body, cid)
        except BaseException:
            placer.abort()
            raise
        first: Optional[InferenceResponse] = None
        while True:
            # Polls first where the backend decided the sync waits may (main.py's EXECUTE
            # wait does the same), for longer (csrc/backend/lane_spin.h, DecideBlsSpin): an
            # answer that comes within the spin costs no wake-up.
            msg = st.sync.recv(st.bls_spin_s)
            if msg.kind == MessageKind.BLS_RESPONSE and msg.id == cid:
                final, resp = decode_response(st.ledger, msg.body)
                if first is None:
                    first = resp
                if final:
                    if gpu_trace.ON:
                        gpu_trace.record("bls.call", t0)
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
            return no_room(request._model_name, e)
        except BaseException:
            placer.abort()
            raise
        return placer, encode_exec(placer, exec_desc(request, decoupled, inputs))

    # ------------------------------------------------------------------ receiving (reader)

    def _on_response(self, msg: Message) -> None:
        # Runs on the reader thread, which must survive whatever happens here.
        try:
            self._deliver(msg)
        except Exception as e:  # noqa: BLE001 - logged; the reader keeps serving
            self.state.log.here(WARNING, f"pybackend stub: BLS response {msg.id} dropped: {e}")

    def _deliver(self, msg: Message) -> None:
        try:
            final, resp = decode_response(self.state.ledger, msg.body)
        except ProtocolError as e:
            self.state.log.here(WARNING, f"pybackend stub: bad BLS_RESPONSE: {e}")
            return
        with self._lock:
            call = self._calls.pop(msg.id, None) if final else self._calls.get(msg.id)
        if call is not None:
            call.push(resp, final)

    def _fail_all(self) -> None:
        with self._lock:
            calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.push(error_response("the backend closed the channel"), True)
