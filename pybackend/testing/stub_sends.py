"""What a :class:`StubModel`'s response senders sent: the responses of a request whose
sender answers (waited for until its FINAL), a stream handed to ``on_response`` as the
stub sends it, and the outputs a client reads from them."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from ..utils.errors import ErrorCode
from .harness_bounds import time_left
from .harness_errors import InferError, no_final
from .outputs import is_requested
from .results import Outputs, parameters_from_json
from .stub_driver import StubDriver
from .transport import FINAL

#: Why the stub stopped answering (StubModel._died), given what failed if anything did.
Died = Callable[[Optional[BaseException]], str]
#: Where a live stream's responses go: ``emit(response or None, final)``.
Emit = Callable[[Optional[Dict[str, Any]], bool], None]


def wait_sent(
    driver: StubDriver,
    token: int,
    timeout: float,
    model_name: str,
    died: Died,
    deadline: Optional[float] = None,
) -> List[Dict[str, Any]]:
    """The responses the request's sender sent, once FINAL came (waited for ``timeout``
    seconds, or until ``deadline`` when given: the timeout counted from the call)."""

    def final() -> bool:
        return any(t == token and f & FINAL for t, f, _ in driver.sends)

    with driver.cond:
        done = driver.cond.wait_for(
            lambda: final() or driver.async_closed, time_left(timeout, deadline)
        )
        got_final = final()
        mine = [r for t, _, r in driver.sends if t == token and r is not None]
        driver.sends[:] = [s for s in driver.sends if s[0] != token]
    if not done:
        raise no_final(model_name, timeout, len(mine))
    if not got_final:
        raise InferError(died(None), ErrorCode.INTERNAL)
    return mine


class SendRoutes:
    """Where the SENDs of a StubModel's requests go, by token: to a live stream's ``emit``
    (an ``infer_stream`` with ``on_response``, a BLS call to the model), and counted, the
    request cancelled (``cancel``) after its ``cancel_after`` responses while the model
    runs (``running``). ``checked``: a response as the client gets it."""

    def __init__(
        self,
        checked: Callable[[Dict[str, Any]], Dict[str, Any]],
        cancel: Callable[[int], None],
        running: Callable[[], bool],
    ) -> None:
        self._checked = checked
        self._cancel = cancel
        self._running = running
        self.live: Dict[int, Emit] = {}
        self.cancel_after: Dict[int, int] = {}  # token -> responses before cancelling
        self.sent_count: Dict[int, int] = {}

    def forget(self, token: int) -> None:
        """The request is done: nothing of it stays here."""
        self.live.pop(token, None)
        self.cancel_after.pop(token, None)
        self.sent_count.pop(token, None)

    def on_send(self, token: int, flags: int, resp: Optional[Dict[str, Any]]) -> bool:
        """Each SEND, on the driver's reader thread; True when it was taken here."""
        emit = self.live.get(token)
        if emit is not None:
            final = bool(flags & FINAL)
            if final:
                self.live.pop(token, None)
            emit(None if resp is None else self._checked(resp), final)
        if resp is not None and self._running():
            count = self.sent_count[token] = self.sent_count.get(token, 0) + 1
            if count == self.cancel_after.get(token):
                self._cancel(token)
        return emit is not None


class LiveStream:
    """An ``infer_stream`` whose responses go to ``on_response`` as the stub sends them
    (taken on the driver's reader thread, like a BLS call's stream)."""

    def __init__(self, requested: Sequence[str], on_response: Callable[[Outputs], None]) -> None:
        self.requested = requested
        self.on_response = on_response
        self.sent: List[Dict[str, Any]] = []
        self.final = threading.Event()

    def emit(self, resp: Optional[Dict[str, Any]], final: bool) -> None:
        if resp is not None:
            self.sent.append(resp)
            if resp.get("error") is None:
                self.on_response(response_outputs(resp, self.requested))
        if final:
            self.final.set()

    def wait(
        self,
        direct: List[Dict[str, Any]],
        driver: StubDriver,
        timeout: float,
        model_name: str,
        died: Died,
        deadline: Optional[float] = None,
    ) -> List[Dict[str, Any]]:
        """All the responses: ``direct`` (what execute answered itself: an error) after what
        was sent, or those sent until FINAL."""
        if direct:
            for resp in direct:
                if resp.get("error") is None:
                    self.on_response(response_outputs(resp, self.requested))
            return self.sent + direct
        end = time.monotonic() + time_left(timeout, deadline)
        while not self.final.wait(min(0.1, max(end - time.monotonic(), 0.0))):
            if driver.async_closed:
                raise InferError(died(None), ErrorCode.INTERNAL)
            if time.monotonic() >= end:
                raise no_final(model_name, timeout, len(self.sent))
        return self.sent


def stream_outputs(
    sent: List[Dict[str, Any]], requested: Sequence[str], cancelled: bool
) -> List[Outputs]:
    out = []
    for resp in sent:
        err = resp.get("error")
        if cancelled and err is not None and err[0] == ErrorCode.CANCELLED:
            break  # the model acknowledged the client's cancel: the stream ends here
        out.append(response_outputs(resp, requested))
    return out


def response_outputs(resp: Dict[str, Any], requested: Sequence[str]) -> Outputs:
    if resp.get("error") is not None:
        code, message = resp["error"]
        raise InferError(message, code)
    outputs: Dict[str, np.ndarray] = resp["outputs"]
    return Outputs(
        ((n, a) for n, a in outputs.items() if is_requested(n, requested)),
        parameters_from_json(resp.get("parameters")),
    )
