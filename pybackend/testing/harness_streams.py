"""The decoupled side of a :class:`~pybackend.testing.harness.ModelHarness`: what response
senders send (also from the model's threads, after ``execute`` returned), collected until
FINAL or handed on as they come, and the client's cancel."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .cancel_watch import CancelWatch
from .harness_errors import no_final
from .harness_execute import HarnessExecute, Inputs
from .harness_responses import response_outputs, stream_outputs
from .results import Outputs
from .transport import FINAL


class HarnessStreams(HarnessExecute):
    """Requests whose response senders answer, and their streams."""

    def __init__(self, model_dir: Union[str, Path], **kwargs: Any) -> None:
        super().__init__(model_dir, **kwargs)
        self._cancel_after: Dict[int, int] = {}  # token -> responses before cancelling
        # token -> what takes the responses of a decoupled BLS call to this model
        self._listeners: Dict[int, Any] = {}

    def infer_stream(
        self,
        inputs: Inputs,
        timeout: float = 30.0,
        cancel_after: Optional[int] = None,
        on_response: Optional[Callable[[Outputs], None]] = None,
        cancel_event: Optional[threading.Event] = None,
        **kwargs: Any,
    ) -> List[Outputs]:
        """A decoupled model's responses to one request, as outputs by name (an error
        response raises :class:`InferError`); the same call as :class:`ServerModel`'s.

        ``cancel_after=n``: the client cancels once ``n`` responses came (``0``: at once);
        from then on ``is_cancelled()`` is true for the request and its sender. The model
        must still end the stream with FINAL; a CANCELLED error response ends it quietly.
        ``on_response``: called with each response's outputs as the model sends it (also
        from the model's threads), before this returns them all. ``cancel_event``: once
        set (by another thread), the client cancels, as with ``cancel_after``.
        ``kwargs``: as :meth:`request` (request id, sequence id and flags, ...)."""
        req = self.request(inputs, **kwargs)
        if cancel_after is not None:
            self._arm_cancel(req._token, cancel_after)
        watch = CancelWatch(cancel_event, lambda: self._cancel_token(req._token))
        try:
            with watch:
                if on_response is None:
                    responses = self.stream(req, timeout)
                else:
                    responses = self._stream_live(req, timeout, on_response)
        finally:
            with self._transport.lock:
                self._transport.cancelled.discard(req._token)
            self._cancel_after.pop(req._token, None)
        quiet = cancel_after is not None or watch.cancelled
        return stream_outputs([self._checked(r, req) for r in responses], req, quiet)

    def stream(
        self, inputs: Union[Inputs, InferenceRequest], timeout: float = 30.0
    ) -> List[InferenceResponse]:
        """A decoupled model's responses to one request, until the response sender's FINAL
        (waited for at most ``timeout`` seconds: senders may answer from threads)."""
        req = inputs if isinstance(inputs, InferenceRequest) else self.request(inputs)
        (ret,) = self.execute([req])
        if ret is not None:
            with self._cond:
                sent = list(self._streams.pop(req._token, []))
            # A model that is not decoupled answers once (returned, or sent with FINAL: then
            # ret is that response); a decoupled one's batch failed: what was sent, the error.
            return [ret] if not self.decoupled else sent + [ret]
        with self._cond:
            if not self._cond.wait_for(lambda: self._done.get(req._token, False), timeout):
                raise no_final(self.model_name, timeout, len(self._streams.get(req._token, [])))
            return list(self._streams.pop(req._token, []))

    def _stream_live(
        self,
        req: InferenceRequest,
        timeout: float,
        on_response: Callable[[Outputs], None],
    ) -> List[InferenceResponse]:
        """:meth:`stream`, handing each response on as the model sends it (a listener
        takes them at the send, so a model that streams from inside ``execute`` is live)."""
        if not self.decoupled:  # its one answer comes when execute is done: nothing to stream
            responses = [self._checked(r, req) for r in self.stream(req, timeout)]
            for resp in responses:
                if not resp.has_error():
                    on_response(response_outputs(resp, req))
            return responses
        token = req._token
        sent: List[InferenceResponse] = []
        final = threading.Event()

        def listen(resp: Optional[InferenceResponse], flags: int) -> None:
            if resp is not None:
                resp = self._checked(resp, req)
                sent.append(resp)
                if not resp.has_error():
                    on_response(response_outputs(resp, req))
                if len(sent) == self._cancel_after.get(token):
                    self._cancel_token(token)
            if flags & FINAL:
                final.set()

        with self._cond:
            self._listeners[token] = listen
        (ret,) = self.execute([req])
        if ret is not None:  # a model's one response, or the error after what was sent
            with self._cond:
                self._listeners.pop(token, None)
            ret = self._checked(ret, req)
            if not ret.has_error():
                on_response(response_outputs(ret, req))
            return sent + [ret]
        if not final.wait(timeout):
            with self._cond:
                self._listeners.pop(token, None)
            raise no_final(self.model_name, timeout, len(sent))
        return sent

    def _arm_cancel(self, token: int, after: int) -> None:
        if after <= 0:
            self._cancel_token(token)
        else:
            self._cancel_after[token] = after

    def _on_send(
        self, request: InferenceRequest, response: Optional[InferenceResponse], flags: int
    ) -> None:
        with self._cond:
            listener = self._listeners.get(request._token)
            if listener is not None:  # a decoupled BLS call's stream takes it as it comes
                listener(response, flags)
                if flags & FINAL:
                    del self._listeners[request._token]
                return
            if response is not None:
                sent = self._streams.setdefault(request._token, [])
                sent.append(response)
                if len(sent) == self._cancel_after.get(request._token):
                    # Before send() returns, as a client's cancel that arrived meanwhile.
                    self._cancel_token(request._token)
            if flags & FINAL:
                self._done[request._token] = True
            self._cond.notify_all()

    def _cancel_token(self, token: int) -> None:
        """The request's client cancelled: its ``is_cancelled()`` turns true."""
        with self._transport.lock:
            self._transport.cancelled.add(token)
