"""EXECUTE -> ``execute(requests)`` -> RESULT, the stub's hot path.

Inputs become zero-copy numpy views (of the backend's arena, or of our private copy of
the datagram); the return value is judged by :mod:`pybackend.stub.returns` (the rules the
offline harness applies too); outputs are placed by :class:`~pybackend.stub.outputs.Placer`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional, Tuple

import numpy as np

from ..ipc import codec
from ..ipc.codec import ProtocolError, ResponseDesc, ResultDesc
from ..ipc.protocol import ResultKind
from ..utils import gpu_trace
from ..utils.errors import ErrorCode
from ..utils.request import (
    TRITONSERVER_REQUEST_RELEASE_ALL,
    InferenceRequest,
)
from ..utils.tensor import Tensor
from .async_execute import AsyncExecutor
from .failures import failed_requests_text
from .loader import no_execute_text
from .logging import ERROR
from .outputs import Placer
from .returns import RESCHEDULED, RESPONSE, SENDER, ReturnRefused, judge_return, runs_as_coroutine
from .sequence_idle import IdleSequences
from .state import StubState
from .tracebacks import MODEL_ERRORS, format_exception

if TYPE_CHECKING:
    import asyncio

_EMPTY = np.empty(0, np.uint8)
_NONE = int(ResultKind.NONE)
_RESPONSE = int(ResultKind.RESPONSE)
_PER_RESULT = codec.PER_RESULT.pack  # kind, release flags: each item's head in a RESULT


def _on_the_watcher(fn: Callable[[], None]) -> None:
    """Where a model's sequence_idle runs in a stub: on the watcher's own thread, under the
    lock ``execute`` runs under (sequence_idle.py takes it)."""
    fn()


class BatchError(Exception):
    """Execute's return value broke a rule; the message is reported verbatim."""


class Dispatcher:
    def __init__(
        self,
        state: StubState,
        model: Any,
        instance: str,
        model_file: str,
        decoupled: bool,
        model_name: str = "",
        model_version: int = -1,
        async_limit: int = 1,
        async_cancel: bool = False,
    ) -> None:
        self.state = state
        self.model = model
        self.instance = instance
        self.model_file = model_file
        self.decoupled = decoupled
        self.model_name = model_name
        self.model_version = model_version
        self.keepalive: Optional[List[Any]] = None
        self._open: List[InferenceRequest] = []  # the batch's requests left to their senders
        self._made = 0  # input tensors built by the current decode
        # (seg, offset, size) of the current batch's input blocks: the backend keeps them
        # until it has read RESULT, so outputs that are views of them need no keepalive.
        self._input_blocks: List[Tuple[int, int, int]] = []
        self.ledger = state.ledger
        self._wrap = state.ledger.wrap  # bound once: it runs for every input in the arena
        self.async_exec = AsyncExecutor(self, async_limit, async_cancel)
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_lock = threading.Lock()
        #: The model's ``sequence_idle`` hook and what it tracks (None: it has none).
        self.sequences: Optional[IdleSequences] = None

    def watch_sequences(self, config: Mapping[str, Any]) -> None:
        """Tell the model of its sequences the server ended for being idle, when it defines
        ``sequence_idle`` and has a sequence batcher (sequence_idle.py); on the watcher's
        thread, under the lock ``execute`` runs under."""
        log = self.state.log
        self.sequences = IdleSequences.of(
            self.model,
            config,
            f"model '{self.model_name}', instance '{self.instance}'",
            _on_the_watcher,
            self.run_coroutine,
            lambda text: log.here(ERROR, text),
        )

    # ------------------------------------------------------------------ event loop

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """The instance's event loop (created on first use, run by a daemon thread)."""
        with self._loop_lock:
            if self.loop is None:
                # Imported on first use: asyncio costs ~15 ms of every stub's start.
                import asyncio

                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name="pybackend-event-loop", daemon=True).start()
                ready.wait()
                self.loop = loop
            return self.loop

    def run_coroutine(self, coro: Any) -> Any:
        loop = self.event_loop()
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def stop_loop(self) -> None:
        """At finalize: no ``sequence_idle`` call from here on, and the event loop stops."""
        if self.sequences is not None:
            self.sequences.close()
        loop = self.loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)

    # ------------------------------------------------------------------ inputs

    def _tensor(
        self,
        name: str,
        dtype: int,
        loc: int,
        dims: tuple,
        n: int,
        seg: int,
        offset: int,
        data: Optional[memoryview],
    ) -> Tensor:
        """Tensor factory for :func:`codec.decode_execute` (arguments as on the wire)."""
        if loc == 0:  # Location.INLINE
            t = Tensor._from_buffer(name, dtype, dims, data if n else _EMPTY)  # type: ignore[arg-type]
        elif loc == 1:  # Location.BACKEND_ARENA
            # Tracked only once the tensor exists: a failure before is freed by the caller.
            t = self._wrap(seg, offset, n, lambda buf: Tensor._from_buffer(name, dtype, dims, buf))
            if n:
                self._input_blocks.append((seg, offset, n))
        elif loc == 3:  # Location.GPU_IPC: FORCE_CPU_ONLY_INPUT_TENSORS "no" (stub/gpu.py)
            gpu = self.ledger.map_gpu(data, n)  # type: ignore[arg-type]
            t = Tensor._on_device(name, dtype, dims, gpu)
        else:
            raise ProtocolError(f"input '{name}' has location {loc}, which inputs cannot use")
        self._made += 1
        return t

    def _request(
        self,
        token: int,
        request_id: str,
        correlation_id: Any,
        flags: int,
        timeout_us: int,
        parameters: str,
        requested: List[str],
        inputs: List[Tensor],
        trace_context: Optional[str],
    ) -> InferenceRequest:
        """Request factory for :func:`codec.decode_execute`."""
        return InferenceRequest._incoming(
            token,
            request_id,
            correlation_id,
            inputs,
            requested,
            flags,
            timeout_us,
            parameters,
            self.decoupled,
            self.model_name,
            self.model_version,
            trace_context,
        )

    def _requests(self, body: bytearray) -> List[InferenceRequest]:
        # Decoded straight into InferenceRequest/Tensor objects: no intermediate
        # descriptors on the hot path.
        self._made = 0  # inputs turned into tensors: from then on, GC returns their blocks
        self._input_blocks = []
        freed: List[Tuple[int, int]] = []  # our blocks the backend hands back with EXECUTE
        try:
            return codec.decode_execute(body, self._tensor, self._request, freed)
        except BaseException:
            # The batch fails: the blocks of inputs not yet wrapped go home right away
            # (those wrapped go when their tensors die). A body that does not decode names
            # none we can trust.
            freed.clear()
            try:
                descs = codec.decode_execute(body, freed=freed)
            except ProtocolError:
                descs = []
                freed.clear()
            self.ledger.give_back_unwrapped([td for d in descs for td in d.inputs][self._made :])
            raise
        finally:
            self.ledger.returned(freed)

    # ------------------------------------------------------------------ execute

    def execute(self, body: memoryview) -> bytearray:
        """Handle one EXECUTE body; returns the RESULT body. The input blocks that died with
        the batch ride in RESULT's freed trailer: the backend frees them once it has read
        the outputs (it pins them until then), with no FREE message of their own."""
        st = self.state
        st.sync_calls = True
        if gpu_trace.ON:
            t0 = gpu_trace.now()
        try:
            result = self._execute(body)
        except BaseException:
            self.ledger.no_result()  # what died meanwhile is the reader's to send
            raise
        finally:
            st.sync_calls = False
        self.ledger.settle(result)
        if gpu_trace.ON:
            gpu_trace.record("execute.total", t0)
        return result

    def _execute(self, body: memoryview) -> bytearray:
        owned = bytearray(body)  # writable, and outlives the channel's receive buffer
        try:
            requests = self._requests(owned)
        except (ProtocolError, Exception) as e:  # noqa: BLE001 - any decode failure fails the batch
            return self._batch_error(f"pybackend stub could not decode the batch: {e}", requests=())
        execute = getattr(self.model, "execute", None)
        if execute is None:
            return self._batch_error(no_execute_text(self.model_file), requests)
        placer = Placer(self.state, for_send=False, pinned=self._input_blocks)
        mark = self.state.async_.sent
        self._open = []
        try:
            if gpu_trace.ON:
                t0 = gpu_trace.now()
            sequences = self.sequences
            ret = execute(requests) if sequences is None else sequences.execute(execute, requests)
            if gpu_trace.ON:
                gpu_trace.record("execute.model", t0)
            if runs_as_coroutine(ret):
                if self.decoupled or self.async_exec.background_default_mode:
                    # In the background: RESULT leaves every request open for its sender.
                    self.async_exec.start(ret, requests)
                    ret = None
                    if not self.decoupled:
                        return self._background_result(requests)
                else:
                    cancelled, ret = self.run_coroutine(self.async_exec.guarded(ret, requests))
                    if cancelled:
                        ret = self.async_exec.cancelled_responses(requests)
            result = self._result(requests, ret, placer)
        except BatchError as e:
            placer.abort()
            return self._batch_error(str(e), requests, mark)
        except MODEL_ERRORS as e:  # model code may raise anything
            placer.abort()
            return self._batch_error(format_exception(e), requests, mark)
        self.keepalive = placer.keepalive
        if self._open:
            watch = self.state.watch_open
            for r in self._open:
                watch(r)
            self._open = []
        # The batch's objects die as this returns: their blocks ride in RESULT (execute()).
        self.ledger.result_follows()
        # u32 on the wire: the backend compares it modulo 2**32.
        return codec.end_result(result, self.state.async_.sent & 0xFFFFFFFF)

    def _background_result(self, requests: List[InferenceRequest]) -> bytearray:
        """RESULT for a default-mode batch whose coroutine runs in the background: every
        request stays open; the coroutine answers through the senders."""
        self.keepalive = None
        watch = self.state.watch_open
        for r in requests:
            watch(r)
        items = [(_NONE, TRITONSERVER_REQUEST_RELEASE_ALL, None)] * len(requests)
        return codec.encode_result(ResultDesc(items, self.state.async_.sent & 0xFFFFFFFF))

    def _result(self, requests: List[InferenceRequest], ret: Any, placer: Placer) -> bytearray:
        """The OK ResultBody for execute's return value ``ret``, written in place (no
        ResultDesc: the hot path); its async_seq is set by the caller."""
        try:
            verdicts = judge_return(ret, requests, self.decoupled, self.instance)
        except ReturnRefused as e:
            raise BatchError(str(e)) from None
        rules = self.state.output_rules  # None unless PYBACKEND_STRICT_OUTPUTS: no checks
        out = codec.begin_result(len(requests))
        for req, (verdict, what) in zip(requests, verdicts):
            flags = req._release_flags
            if verdict == RESPONSE:
                if rules is not None:
                    what = rules.check(what, req._requested).response
                out += _PER_RESULT(_RESPONSE, flags)
                placer.write_response(out, what, req._requested)
            elif verdict == SENDER:
                # Its sender answers, also after execute returned (from a thread, say); if it
                # is dropped without FINAL the stub reports it (SENDER_DROPPED) and the
                # client gets an error.
                sender = req._sender
                if self.decoupled or sender is None or not sender._closed:
                    self._open.append(req)
                out += _PER_RESULT(_NONE, flags)
            elif verdict == RESCHEDULED:
                # A decoupled sender kept from this execution (a thread's) may still answer
                # while the request waits to come back: the backend keeps this execution's
                # factory until FINAL or until the stub reports the objects gone.
                if self.decoupled:
                    self._open.append(req)
                out += _PER_RESULT(_NONE, flags)
            else:  # UNANSWERED: nobody can answer it
                text = failed_requests_text(self.instance, what)
                out += _PER_RESULT(_RESPONSE, flags)
                codec.put_response(
                    out, ResponseDesc((), "", (ErrorCode.INTERNAL, text), fails=True)
                )
        return out

    def _batch_error(self, message: str, requests: Any, async_mark: int = -1) -> bytearray:
        """RESULT for a failed batch. ``async_mark``: the async count when the batch
        started. If anything went out on async since (a sender's SEND above all), the
        failure travels as one error response per request in an OK result, because only
        that form carries ``async_seq``: the backend then handles those SENDs before it
        fails the requests that are still open (a batch-error RESULT has no async_seq)."""
        finished = []  # requests whose sender already sent FINAL: nothing more for them
        for r in requests:
            sender = r._sender
            finished.append(sender is not None and sender._closed)
            if sender is not None:
                sender._close()
        text = failed_requests_text(self.instance, message)
        sent_meanwhile = async_mark >= 0 and self.state.async_.sent != async_mark
        self.state.log.here(ERROR, text)
        if not sent_meanwhile or not requests:
            return codec.encode_result_error(ErrorCode.INTERNAL, text)
        error = ResponseDesc((), "", (ErrorCode.INTERNAL, text), fails=True)
        items = [
            (_NONE, TRITONSERVER_REQUEST_RELEASE_ALL, None)
            if done
            else (_RESPONSE, TRITONSERVER_REQUEST_RELEASE_ALL, error)
            for done in finished
        ]
        return codec.encode_result(ResultDesc(items, self.state.async_.sent & 0xFFFFFFFF))
