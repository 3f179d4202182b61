"""An error the development server answers with, and the HTTP status tritonserver gives
each Triton error code (observed on tritonserver 2.51, also for a model's error response:
tests/devserver/test_error_codes_differential.py; UNKNOWN, ALREADY_EXISTS and CANCELLED are
400, not the 500, 409 and 499 their names suggest)."""

from __future__ import annotations

from ..errors import PybackendError
from ..utils.errors import ErrorCode

HTTP_STATUS = {
    ErrorCode.UNKNOWN: 400,
    ErrorCode.INTERNAL: 500,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_ARG: 400,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNSUPPORTED: 501,
    ErrorCode.ALREADY_EXISTS: 400,
    ErrorCode.CANCELLED: 400,
}


class ServeError(PybackendError):
    """A request the server refuses or could not serve: ``message`` for the client, ``code``
    a Triton error code (the HTTP status and the gRPC status follow from it)."""

    def __init__(self, message: str, code: int = ErrorCode.INTERNAL) -> None:
        super().__init__(message)
        self.message = message
        self.code = ErrorCode(code)

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)
