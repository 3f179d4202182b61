"""``TritonError`` (a value carried by a response) and ``TritonModelException`` (what
pb_utils raises, and what model code may raise)."""

from __future__ import annotations

from .arguments import as_instance, as_string
from .pybind_enum import PybindEnum


class ErrorCode(PybindEnum):
    """Numerically equal to the C ``TRITONSERVER_Error_Code``."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7


# The original's pybind11 name (TritonError.__ErrorCode), which a code prints with.
ErrorCode.__name__ = "__ErrorCode"


class TritonError:
    """An error to return to the client: ``TritonError(message, code=TritonError.INTERNAL)``.

    Not an exception (exactly as upstream): put it in ``InferenceResponse(error=...)``.
    """

    __slots__ = ("_message", "_code")

    UNKNOWN = ErrorCode.UNKNOWN
    INTERNAL = ErrorCode.INTERNAL
    NOT_FOUND = ErrorCode.NOT_FOUND
    INVALID_ARG = ErrorCode.INVALID_ARG
    UNAVAILABLE = ErrorCode.UNAVAILABLE
    UNSUPPORTED = ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = ErrorCode.ALREADY_EXISTS
    CANCELLED = ErrorCode.CANCELLED

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INTERNAL) -> None:
        # The code is an enum member, as in the original (a plain int is refused).
        self._code = as_instance(
            code, ErrorCode, "TritonError", "code", "a TritonError code (TritonError.INTERNAL...)"
        )
        self._message = as_string(message, "TritonError", "message")

    def code(self) -> ErrorCode:
        return self._code

    def message(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, TritonError.{self._code.name})"

    def __str__(self) -> str:
        return self._message


class TritonModelException(Exception):
    """Raised by pb_utils for every API misuse and backend failure; model code raises it too."""
