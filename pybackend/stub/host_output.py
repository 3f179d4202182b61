"""What a process shared by a model's instances (PYBACKEND_INSTANCE_PROCESS shared/fork)
writes on stdout and stderr, tagged with the instance it belongs to.

The backend reads that process's two pipes, as it reads an instance's own stub's, but one
pipe serves every instance: untagged, a line could only be named after the process. So a
line that an instance's code writes through ``sys.stdout``/``sys.stderr`` (print, a
traceback) goes out as one record, ``\\x1e{"instance": name, "text": line}``, which the
backend logs exactly as it logs that line of an instance's own process (``model/instance:``
prefix; stderr at ERROR). A log record made where no instance's channel serves it
(``pb_utils.Logger`` or Python ``logging`` at import time) goes out as
``\\x1e{"log": [level, file, line, message]}`` and becomes a server log line at its level
with the model's file and line, as a Logger call in ``execute`` does. The reader is
csrc/backend/host_output.cc. Output of C code (fd 1 and 2 directly) stays untagged and is
named after the process.
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from typing import Callable, Dict, NamedTuple, Optional, TextIO

from ..utils.transport import Transport

RECORD = "\x1e"


def record(fields: Dict[str, object]) -> str:
    """One tagged line; JSON keeps newlines and any text inside the record."""
    return RECORD + json.dumps(fields, separators=(",", ":")) + "\n"


class _Pending(NamedTuple):
    """The unfinished line of one thread."""

    instance: str
    thread: threading.Thread
    text: str


class InstanceLines(io.TextIOBase):
    """A text stream over ``target`` that tags each line with the instance of the thread
    that wrote it (``instance_of()``; None: not an instance's, written as it is).

    A partial line waits, per thread, for its newline, as the backend's reader waits for an
    untagged one. It is never lost: the line of a thread that ended goes out on the next
    tagged write, and :meth:`end_instance` sends what an instance's threads left when the
    instance ends (an instance's own process sends its last line when it exits)."""

    def __init__(self, target: TextIO, instance_of: Callable[[], Optional[str]]) -> None:
        super().__init__()
        self.target = target
        self.instance_of = instance_of
        self._partial: Dict[int, _Pending] = {}
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")

    @property
    def errors(self) -> Optional[str]:  # type: ignore[override]
        return getattr(self.target, "errors", None)

    @property
    def buffer(self) -> object:
        return self.target.buffer  # bytes written there are the process's own

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        instance = self.instance_of()
        if instance is None:
            with self._lock:
                self.target.write(text)
            return len(text)
        key, thread = threading.get_ident(), threading.current_thread()
        with self._lock:
            # A thread that ended left its line here, and its ident may be this thread's now.
            self._send_where(lambda p: p.thread is not thread and not p.thread.is_alive())
            pending = self._partial.pop(key, None)
            *lines, rest = ((pending.text if pending else "") + text).split("\n")
            if rest:
                self._partial[key] = _Pending(instance, thread, rest)
            for line in lines:
                self.target.write(record({"instance": instance, "text": line}))
            if lines:
                self.target.flush()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self.target.flush()

    def end_instance(self, instance: Optional[str]) -> None:
        """``instance`` is done (None: the whole process): its threads' unfinished lines go
        out as lines."""
        with self._lock:
            self._send_where(lambda p: instance is None or p.instance == instance)

    def _send_where(self, done: Callable[[_Pending], bool]) -> None:
        ended = [key for key, pending in self._partial.items() if done(pending)]
        for key in ended:
            pending = self._partial.pop(key)
            self.target.write(record({"instance": pending.instance, "text": pending.text}))
        if ended:
            self.target.flush()


def log_record(level: int, filename: str, line: int, message: str) -> None:
    """A log record with no instance channel to carry it (written to the real stderr)."""
    stream = sys.__stderr__ or sys.stderr
    stream.write(record({"log": [level, filename, line, message]}))
    stream.flush()


class HostTransport(Transport):
    """The transport of a shared process's code that works for no instance (model.py's
    import): its log records go out as tagged records."""

    def log(self, level: int, filename: str, line: int, message: str) -> None:
        log_record(level, filename, line, message)


def tag_streams(instance_of: Callable[[], Optional[str]]) -> None:
    """Route this process's sys.stdout and sys.stderr through :class:`InstanceLines`."""
    sys.stdout = InstanceLines(sys.__stdout__ or sys.stdout, instance_of)
    sys.stderr = InstanceLines(sys.__stderr__ or sys.stderr, instance_of)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _after_fork_in_child() -> None:
    # A process that model.py forks has only the forking thread: a lock another thread held
    # at the fork stays held (its print would hang), and the others' partial lines are not
    # its own.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, InstanceLines):
            stream._lock = threading.Lock()
            stream._partial = {}


def end_instance(instance: Optional[str]) -> None:
    """What the threads of ``instance`` (None: of every instance) left unfinished on this
    process's tagged stdout and stderr goes out; nothing where they are not tagged."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, InstanceLines):
            stream.end_instance(instance)


__all__ = [
    "HostTransport",
    "InstanceLines",
    "RECORD",
    "end_instance",
    "log_record",
    "record",
    "tag_streams",
]
