"""The response senders of a :class:`~pybackend.testing.harness.ModelHarness`'s requests:
what they send (also from the model's threads, after ``execute`` returned), kept until FINAL
or handed to a listener as it comes, and the client's cancel (:class:`SenderStreams`); and
the calls that read a request's stream (:class:`StreamCalls`: ``stream``, ``infer_stream``)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Union

from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .cancel_watch import CancelWatch
from .harness_bounds import time_left
from .harness_errors import InferError, NoFinal, no_final
from .harness_responses import OutputNames, response_outputs, stream_outputs
from .model_dir import ModelOnDisk
from .results import Outputs
from .transport import FINAL, HarnessTransport

if TYPE_CHECKING:  # pragma: no cover
    from .harness_execute import Executor, Inputs

#: Takes a response sent to a request (None: a FINAL flag alone) and the send's flags.
Listener = Callable[[Optional[InferenceResponse], int], None]


class SenderStreams:
    """Per request token: what its response sender sent, whether its FINAL came, and who
    takes its responses as they come (a live stream, a decoupled BLS call)."""

    def __init__(self, transport: HarnessTransport) -> None:
        self._transport = transport
        self.cond = threading.Condition()
        self._sent: Dict[int, List[InferenceResponse]] = {}
        self._done: Dict[int, bool] = {}
        self._cancel_after: Dict[int, int] = {}  # token -> responses before cancelling
        self._listeners: Dict[int, Listener] = {}

    def on_send(
        self, request: InferenceRequest, response: Optional[InferenceResponse], flags: int
    ) -> None:
        """A send of the request's response sender (the transport routes it here)."""
        self.on_token_send(request._token, response, flags)

    def on_token_send(self, token: int, response: Optional[InferenceResponse], flags: int) -> None:
        """:meth:`on_send` for the request ``token`` (an error that ends a dropped sender's
        request comes with no request: harness_drops.py)."""
        with self.cond:
            listener = self._listeners.get(token)
            if listener is not None:  # a live stream takes it as it comes
                listener(response, flags)
                if flags & FINAL:
                    del self._listeners[token]
                return
            if response is not None:
                sent = self._sent.setdefault(token, [])
                sent.append(response)
                if len(sent) == self._cancel_after.get(token):
                    # Before send() returns, as a client's cancel that arrived meanwhile.
                    self.cancel(token)
            if flags & FINAL:
                self._done[token] = True
            self.cond.notify_all()

    def final_answer(self, token: int) -> Optional[InferenceResponse]:
        """The first response sent, once the sender's FINAL came (None before, or when the
        FINAL came alone)."""
        with self.cond:
            sent = self._sent.get(token)
            return sent[0] if sent and self._done.get(token) else None

    def completed(self, token: int) -> bool:
        """Whether the request's sender sent its FINAL."""
        with self.cond:
            return self._done.get(token, False)

    def wait_final(self, token: int, timeout: float) -> Optional[List[InferenceResponse]]:
        """What the sender sent, once its FINAL came (None: no FINAL within ``timeout``)."""
        with self.cond:
            if not self.cond.wait_for(lambda: self._done.get(token, False), timeout):
                return None
            return list(self._sent.get(token, []))

    def count(self, token: int) -> int:
        with self.cond:
            return len(self._sent.get(token, []))

    def take(self, token: int) -> List[InferenceResponse]:
        """What the sender sent, forgotten here."""
        with self.cond:
            return list(self._sent.pop(token, []))

    def listen(self, token: int, listener: Listener) -> None:
        with self.cond:
            self._listeners[token] = listener

    def unlisten(self, token: int) -> None:
        with self.cond:
            self._listeners.pop(token, None)

    def cancel_after(self, token: int, after: int) -> None:
        """The client cancels once the sender sent ``after`` responses (``0``: now)."""
        if after <= 0:
            self.cancel(token)
        else:
            self._cancel_after[token] = after

    def cancels_after(self, token: int) -> Optional[int]:
        return self._cancel_after.get(token)

    def cancel(self, token: int) -> None:
        """The request's client cancelled: its ``is_cancelled()`` turns true."""
        with self._transport.lock:
            self._transport.cancelled.add(token)

    def end(self, token: int) -> None:
        """The client is done with the request: no cancel is pending for it any more."""
        with self._transport.lock:
            self._transport.cancelled.discard(token)
        self._cancel_after.pop(token, None)


class StreamCalls:
    """A request's responses as a client reads them, from what ``executor`` returns and
    ``streams`` collects for the model in ``disk``."""

    def __init__(self, disk: ModelOnDisk, executor: "Executor", streams: SenderStreams) -> None:
        self._disk = disk
        self._executor = executor
        self._streams = streams

    def infer_stream(
        self,
        inputs: "Inputs",
        timeout: float,
        cancel_after: Optional[int],
        on_response: Optional[Callable[[Outputs], None]],
        cancel_event: Optional[threading.Event],
        **kwargs: Any,
    ) -> List[Outputs]:
        """:meth:`ModelHarness.infer_stream`."""
        req = self._executor.request(inputs, **kwargs)
        token = req._token
        names = OutputNames(req)
        held = [req]  # handed on: from execute on, the harness holds no reference to it
        del req
        if cancel_after is not None:
            self._streams.cancel_after(token, cancel_after)
        watch = CancelWatch(cancel_event, lambda: self._streams.cancel(token))
        # The timeout counts from here, execute included, as in a stub process or the
        # server: the model runs on a worker thread this call waits for (harness_bounds.py).
        deadline = time.monotonic() + timeout
        live: List[InferenceResponse] = []

        def run() -> List[InferenceResponse]:
            if on_response is None:
                return self.stream_held(held, timeout, deadline)
            return self._stream_live(held, names, timeout, on_response, deadline, live)

        timed_out = False
        try:
            with watch:
                responses = self._executor.abandoned.bounded(
                    run, timeout, deadline, [token], lambda: self._no_final(token, timeout, live)
                )
        except NoFinal:
            timed_out = True
            raise
        finally:
            if timed_out:
                # As the server engine's client cancels a stream left without FINAL: the
                # request stays cancelled, for a model that checks is_cancelled() to stop.
                self._streams.cancel(token)
            else:
                self._streams.end(token)
        quiet = cancel_after is not None or watch.cancelled
        checked = [self._executor.checked(r, names) for r in responses]
        return stream_outputs(checked, names, quiet)

    def _no_final(self, token: int, timeout: float, live: List[InferenceResponse]) -> InferError:
        """No FINAL within ``timeout`` of the call: the stub engine's error."""
        return no_final(self._disk.model_name, timeout, len(live) or self._streams.count(token))

    def stream(
        self, inputs: Union["Inputs", InferenceRequest], timeout: float
    ) -> List[InferenceResponse]:
        """:meth:`ModelHarness.stream`, bounded as :meth:`infer_stream` (execute included)."""
        req = inputs if isinstance(inputs, InferenceRequest) else self._executor.request(inputs)
        del inputs
        token = req._token
        held = [req]
        del req
        deadline = time.monotonic() + timeout
        return self._executor.abandoned.bounded(
            lambda: self.stream_held(held, timeout, deadline),
            timeout,
            deadline,
            [token],
            lambda: self._no_final(token, timeout, []),
        )

    def stream_held(
        self, held: List[InferenceRequest], timeout: float, deadline: Optional[float] = None
    ) -> List[InferenceResponse]:
        """:meth:`stream` of the one request in ``held``, taken out of it: once execute
        returned the harness keeps no reference to the request, so a sender the model
        dropped is noticed (harness_drops.py; a request the caller holds stays alive)."""
        req = held.pop()
        token = req._token
        (ret,) = self._executor.execute([req])
        del req
        if ret is not None:
            sent = self._streams.take(token)
            # A model that is not decoupled answers once (returned, or sent with FINAL: then
            # ret is that response); a decoupled one's batch failed: what was sent, the error.
            return [ret] if not self._disk.decoupled else sent + [ret]
        if self._streams.wait_final(token, time_left(timeout, deadline)) is None:
            raise no_final(self._disk.model_name, timeout, self._streams.count(token))
        return self._streams.take(token)

    def _stream_live(
        self,
        held: List[InferenceRequest],
        names: OutputNames,
        timeout: float,
        on_response: Callable[[Outputs], None],
        deadline: Optional[float] = None,
        sent: Optional[List[InferenceResponse]] = None,
    ) -> List[InferenceResponse]:
        """:meth:`_stream`, handing each response on as the model sends it (a listener
        takes them at the send, so a model that streams from inside ``execute`` is live)."""
        checked = self._executor.checked
        if not self._disk.decoupled:  # its one answer comes when execute is done
            responses = [checked(r, names) for r in self.stream_held(held, timeout, deadline)]
            for resp in responses:
                if not resp.has_error():
                    on_response(response_outputs(resp, names))
            return responses
        req = held.pop()
        token = req._token
        sent = [] if sent is None else sent  # the caller's: it counts them on a timeout
        final = threading.Event()

        def listen(resp: Optional[InferenceResponse], flags: int) -> None:
            if resp is not None:
                resp = checked(resp, names)
                sent.append(resp)
                if not resp.has_error():
                    on_response(response_outputs(resp, names))
                if len(sent) == self._streams.cancels_after(token):
                    self._streams.cancel(token)
            if flags & FINAL:
                final.set()

        self._streams.listen(token, listen)
        (ret,) = self._executor.execute([req])
        del req
        if ret is not None:  # a model's one response, or the error after what was sent
            self._streams.unlisten(token)
            ret = checked(ret, names)
            if not ret.has_error():
                on_response(response_outputs(ret, names))
            return sent + [ret]
        if not final.wait(time_left(timeout, deadline)):
            self._streams.unlisten(token)
            raise no_final(self._disk.model_name, timeout, len(sent))
        return sent
