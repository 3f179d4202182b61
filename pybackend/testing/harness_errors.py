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
    """A response sender that answered a request of a model that is not decoupled with
    ``count`` responses where its client waits for one; every offline engine raises it."""
    return InferError(f"the model sent {count} responses, not 1")


#: tritonserver 2.51's refusal of ``infer`` (HTTP) of a decoupled model, status 501.
DECOUPLED_ON_HTTP = "HTTP end point doesn't support models with decoupled transaction policy"


def decoupled_infer_refused(model_name: str) -> InferError:
    """``infer()`` of a decoupled model: refused before anything runs, as tritonserver
    refuses it (its HTTP text and code, UNSUPPORTED; unary gRPC's ModelInfer likewise), so a
    test meant for every engine cannot pass offline and fail through the server."""
    return InferError(
        f"{DECOUPLED_ON_HTTP}: model '{model_name}' is decoupled, and infer() waits for one "
        "response, which tritonserver refuses; use infer_stream(), which returns every "
        "response until FINAL",
        ErrorCode.UNSUPPORTED,
    )


class TimedOut(InferError):
    """A call's answer did not come within its ``timeout`` (NoFinal, NoResponse)."""


class NoFinal(TimedOut):
    """A decoupled request's stream did not end: no FINAL within the wait."""


class NoResponse(TimedOut):
    """A request's ``execute`` did not return within the caller's timeout."""


def no_response(
    model_name: str, instance_name: str, call: str, timeout: float, what: str
) -> NoResponse:
    """The ``call`` (``infer``, ``infer_batch``, ``execute``) got no answer within
    ``timeout`` seconds of its start; ``what``: what became of the execute (every engine
    words its own)."""
    instance = f" (instance '{instance_name}')" if instance_name else ""
    return NoResponse(
        f"no response from model '{model_name}'{instance} within timeout={timeout:g} s of "
        f"{call}(): its execute did not return by then; {what}; pass a larger timeout= if "
        "the model is that slow, or let execute stop once request.is_cancelled() is True"
    )


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
