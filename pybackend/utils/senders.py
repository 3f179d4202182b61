"""``InferenceResponseSender``: the per-request sender and its one-response rules for
default (non-decoupled) models."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

from . import transport as _transport
from .arguments import as_instance, as_int
from .errors import TritonModelException
from .response import InferenceResponse

if TYPE_CHECKING:  # pragma: no cover
    from .request import InferenceRequest

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1

CLOSED = "Unable to send response. Response sender has been closed."
MORE_THAN_ONE = "Unable to send response. Non-decoupled model cannot send more than one response."
FINAL_FIRST = (
    "Unable to send response. Non-decoupled model cannot send complete final before "
    "sending a response."
)
BAD_FLAG = "Unable to send response. Unsupported flag provided."
NEED_RESPONSE = "Inference Response object must be provided when the response flags is set to zero."


class InferenceResponseSender:
    """Validates locally, then hands the response to the transport (which does not
    block on the server).

    The sender copies what it needs from its request instead of referencing it: the
    request caches its sender, and a reference back would make every request/sender pair
    a reference cycle that only the cyclic GC frees. Without the cycle both die the moment
    the model lets go of them, which is when the stub tells the backend that a request
    was left without its final response (UV-10). The transport gets the sender where it
    expects a request: both carry ``_token`` and ``_requested``."""

    __slots__ = (
        "_token",
        "_requested",
        "_request_id",
        "_decoupled",
        "_sent_response",
        "_closed",
        "_cancelled",
        "_lock",
        "__weakref__",
    )

    def __init__(self, request: "InferenceRequest", decoupled: bool) -> None:
        self._token = request._token
        self._requested = request._requested
        self._request_id = request._request_id
        self._cancelled = request._cancelled
        self._decoupled = decoupled
        self._sent_response = False
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response: Optional[InferenceResponse] = None, flags: int = 0) -> None:
        # Checked inline for the common values: this runs once per response (hot path).
        if response is not None and type(response) is not InferenceResponse:
            response = as_instance(
                response, InferenceResponse, "send", "response", "pb_utils.InferenceResponse"
            )
        if type(flags) is not int or not 0 <= flags <= 0xFFFFFFFF:
            flags = as_int(flags, "send", "flags", "uint32")
        if flags != 0 and flags != TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            raise TritonModelException(BAD_FLAG)
        if flags == 0 and response is None:
            raise TritonModelException(NEED_RESPONSE)
        with self._lock:
            self._check(response is not None, flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            _transport._current.send_response(self, response, flags)  # type: ignore[arg-type]

    def _check(self, has_response: bool, final: bool) -> None:
        """Apply the sender rules and update the state (caller holds the lock)."""
        # The one-response rules come first: a second response after FINAL is reported
        # as "more than one response", like the original does.
        if not self._decoupled:
            if has_response and self._sent_response:
                raise TritonModelException(MORE_THAN_ONE)
            if not has_response and final and not self._sent_response:
                raise TritonModelException(FINAL_FIRST)
        if self._closed:
            raise TritonModelException(CLOSED)
        if has_response:
            self._sent_response = True
        if final:
            self._closed = True

    def _take_returned(self) -> None:
        """A response for this request came back in execute's return list."""
        with self._lock:
            self._check(True, True)

    def _close(self) -> None:
        with self._lock:
            self._closed = True

    def _untouched(self) -> bool:
        """Nothing was sent and the sender is still open."""
        return not self._sent_response and not self._closed

    def is_cancelled(self) -> bool:
        if not self._cancelled:
            self._cancelled = bool(_transport._current.is_cancelled(self))  # type: ignore[arg-type]
        return self._cancelled

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"InferenceResponseSender({self._request_id!r}, {state})"
