"""``pb_utils.Logger``: messages go to the server log through the current transport,
tagged with the caller's file and line."""

from __future__ import annotations

import enum
import sys

from . import transport as _transport


class LogLevel(enum.IntEnum):
    """Numerically equal to ``TRITONSERVER_LogLevel``."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


def _emit(message: object, level: int, depth: int) -> None:
    frame = sys._getframe(depth)
    _transport._current.log(int(level), frame.f_code.co_filename, frame.f_lineno, str(message))


class Logger:
    """Static logging API. Attribute assignment is allowed (PyTriton does
    ``Logger.error = Logger.log_error``)."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: int = LogLevel.INFO) -> None:
        _emit(message, level, 2)

    @staticmethod
    def log_info(message: str) -> None:
        _emit(message, LogLevel.INFO, 2)

    @staticmethod
    def log_warn(message: str) -> None:
        _emit(message, LogLevel.WARNING, 2)

    @staticmethod
    def log_error(message: str) -> None:
        _emit(message, LogLevel.ERROR, 2)

    @staticmethod
    def log_verbose(message: str) -> None:
        _emit(message, LogLevel.VERBOSE, 2)
