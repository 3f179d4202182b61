"""Log transport of the stub: LOG messages on the async channel (the backend forwards
them to the server log); stderr in Triton's format when the channel is gone."""

from __future__ import annotations

import logging
import sys
from typing import Optional

from ..ipc.channel import Channel
from ..ipc.codec import encode_log
from ..ipc.protocol import MessageKind
from ..utils.transport import Transport, format_log_line

INFO, WARNING, ERROR, VERBOSE = 0, 1, 2, 3


class StubLog:
    def __init__(self, channel: Optional[Channel] = None) -> None:
        self.channel = channel

    def log(self, level: int, filename: str, line: int, message: str) -> None:
        ch = self.channel
        if ch is not None:
            try:
                ch.send(MessageKind.LOG, encode_log(level, line, filename, message))
                return
            except OSError:
                self.channel = None
        sys.stderr.write(format_log_line(level, filename, line, message) + "\n")
        sys.stderr.flush()

    def here(self, level: int, message: str) -> None:
        """Log a message of the stub itself, tagged with the caller's file and line."""
        frame = sys._getframe(1)
        self.log(level, frame.f_code.co_filename, frame.f_lineno, message)


class RecordForwarder(logging.Handler):
    """Python ``logging`` records that no handler of the model took (``logging.lastResort``)
    go to the server log at their own level, with their own file and line, instead of
    to stderr as unlevelled text (UV-25). A model that configures logging keeps it."""

    def __init__(self, log: "StubLog | Transport") -> None:
        super().__init__(logging.NOTSET)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = record.levelno
            ours = (
                ERROR
                if level >= logging.ERROR
                else WARNING
                if level >= logging.WARNING
                else (INFO if level >= logging.INFO else VERBOSE)
            )
            self._log.log(ours, record.pathname, record.lineno, self.format(record))
        except Exception:  # noqa: BLE001 - logging must never raise into model code
            self.handleError(record)
