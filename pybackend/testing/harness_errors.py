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


def no_final(model_name: str, timeout: float, count: int) -> InferError:
    """A request's response sender sent no FINAL within ``timeout`` seconds (``count``:
    the responses it sent meanwhile); both offline engines raise it."""
    return InferError(
        f"no FINAL from the response sender of '{model_name}' within "
        f"{timeout:g} s ({count} responses so far)"
    )
