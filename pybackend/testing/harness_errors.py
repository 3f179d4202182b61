"""The errors the harness's calls raise where a client would get an error."""

from __future__ import annotations

from ..errors import PybackendError
from ..utils.errors import ErrorCode


class InferError(PybackendError):
    """An error response (or a refused request) where outputs were expected; ``code`` is a
    pb_utils.TritonError code."""

    def __init__(self, message: str, code: int = ErrorCode.INTERNAL) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def not_one_response(count: int) -> InferError:
    """``infer`` of a decoupled model whose request got ``count`` responses (it expects one;
    tritonserver refuses ``infer`` of a decoupled model: docs/testing.md); every offline
    engine raises it."""
    return InferError(f"the decoupled model sent {count} responses, not 1")


class NoFinal(InferError):
    """A decoupled request's stream did not end: no FINAL within the wait."""


def no_final(model_name: str, timeout: float, count: int) -> InferError:
    """A request's response sender sent no FINAL within ``timeout`` seconds (``count``:
    the responses it sent meanwhile); every engine raises it."""
    return NoFinal(
        f"no FINAL from the response sender of '{model_name}' within "
        f"{timeout:g} s ({count} responses so far)"
    )


#: The status a tritonclient exception carries -> the Triton error code the server answered
#: with. gRPC names every code; HTTP's statuses are tritonserver 2.51's, observed: 400
#: INVALID_ARG, 404 NOT_FOUND, 500 INTERNAL (and an error response's default code), 501
#: UNSUPPORTED (a decoupled model on HTTP).
_CLIENT_STATUS = {
    "400": ErrorCode.INVALID_ARG,
    "404": ErrorCode.NOT_FOUND,
    "500": ErrorCode.INTERNAL,
    "501": ErrorCode.UNSUPPORTED,
    "StatusCode.UNKNOWN": ErrorCode.UNKNOWN,
    "StatusCode.INTERNAL": ErrorCode.INTERNAL,
    "StatusCode.NOT_FOUND": ErrorCode.NOT_FOUND,
    "StatusCode.INVALID_ARGUMENT": ErrorCode.INVALID_ARG,
    "StatusCode.UNAVAILABLE": ErrorCode.UNAVAILABLE,
    "StatusCode.UNIMPLEMENTED": ErrorCode.UNSUPPORTED,
    "StatusCode.ALREADY_EXISTS": ErrorCode.ALREADY_EXISTS,
    "StatusCode.CANCELLED": ErrorCode.CANCELLED,
}


def from_client(error: object) -> InferError:
    """A tritonclient ``InferenceServerException`` (the server's error response) as the
    :class:`InferError` the offline engines raise for it: its message and its code."""
    message = error.message() if hasattr(error, "message") else str(error)
    status = error.status() if hasattr(error, "status") else None
    return InferError(str(message), _CLIENT_STATUS.get(str(status), ErrorCode.INTERNAL))
