"""``TritonError`` (a value carried by a response) and ``TritonModelException`` (what
pb_utils raises, and what model code may raise)."""

from __future__ import annotations

import enum

from .arguments import as_instance, as_string


class ErrorCode(enum.IntEnum):
    """Numerically equal to the C ``TRITONSERVER_Error_Code``."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    # Printed as the original's pybind11 enum (TritonError.__ErrorCode) prints, so that a
    # model's log line or message with a code reads the same under both backends: an
    # IntEnum prints "4" on Python 3.11+ and "ErrorCode.UNAVAILABLE" before.
    def __repr__(self) -> str:
        return f"<__ErrorCode.{self.name}: {int(self)}>"

    def __str__(self) -> str:
        return f"__ErrorCode.{self.name}"

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)

    def __bool__(self) -> bool:
        return True  # a pybind11 enum object, UNKNOWN (0) included


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
