"""``pb_utils.Logger``: messages go to the server log through the current transport,
tagged with the caller's file and line."""

from __future__ import annotations

import sys

from . import transport as _transport
from .arguments import as_instance, as_string
from .pybind_enum import PybindEnum


class LogLevel(PybindEnum):
    """Numerically equal to ``TRITONSERVER_LogLevel``."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


def _emit(text: str, level: int, depth: int) -> None:
    frame = sys._getframe(depth)
    _transport._current.log(int(level), frame.f_code.co_filename, frame.f_lineno, text)


def _level(level: object) -> LogLevel:
    # A member of Logger.LogLevel, as in the original (a plain int is refused).
    return as_instance(level, LogLevel, "log", "level", "a Logger level (Logger.INFO...)")


_Level = LogLevel  # for annotations inside Logger, whose LogLevel is a class attribute


class Logger:
    """Static logging API. Attribute assignment is allowed (PyTriton does
    ``Logger.error = Logger.log_error``)."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: _Level = LogLevel.INFO) -> None:
        _emit(as_string(message, "log", "message"), _level(level), 2)

    @staticmethod
    def log_info(message: str) -> None:
        _emit(as_string(message, "log_info", "message"), LogLevel.INFO, 2)

    @staticmethod
    def log_warn(message: str) -> None:
        _emit(as_string(message, "log_warn", "message"), LogLevel.WARNING, 2)

    @staticmethod
    def log_error(message: str) -> None:
        _emit(as_string(message, "log_error", "message"), LogLevel.ERROR, 2)

    @staticmethod
    def log_verbose(message: str) -> None:
        _emit(as_string(message, "log_verbose", "message"), LogLevel.VERBOSE, 2)
