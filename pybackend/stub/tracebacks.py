"""Exceptions rendered the way the original backend (pybind11) renders them:
``<Type>: <str(exc)>\\n\\nAt:\\n  <file>(<line>): <function>\\n`` innermost frame first."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from types import TracebackType
from typing import Any, List, Optional

# Frames of pybackend itself and of the import machinery are not the model's: pybind11 in
# the original never sees them (its C++ calls into Python directly, and CPython strips
# importlib's frames from import errors).
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_HIDDEN_DIRS = (_OURS, os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep)
_HIDDEN_PREFIXES = ("<frozen importlib",)
# The standard library's machinery the stub runs the model through: a future's result()
# re-raising an async execute's exception, the event loop, the thread the stub started.
# Hidden only where the stub (or the stub's entry) called into them; a model that uses them
# itself keeps their frames, as it does on the original.
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_MACHINERY = tuple(
    _STDLIB + name for name in ("concurrent" + os.sep, "asyncio" + os.sep, "threading.py")
)
_HEAPTYPE = 1 << 9

# What model code may raise that becomes its error: the original's pybind11 binding turns
# every Python exception into one, whatever its class: SystemExit and KeyboardInterrupt too
# (sys.exit() in execute fails that request's batch and the stub goes on serving; in
# initialize it fails the load with "SystemExit: <code>").
MODEL_ERRORS = BaseException


class ModelExit(Exception):
    """An exception that is no Exception (SystemExit, KeyboardInterrupt, a BaseException
    of the model's) raised in a coroutine, carried as an ordinary one: asyncio lets the
    first two end the event loop's thread instead of failing the task (the original's async
    execute then never answers), and the stub's background tasks handle Exception."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


async def exits_as_errors(coro: Any) -> Any:
    """Awaits ``coro``; what it raises that is no Exception comes out as :class:`ModelExit`,
    but the event loop's own cancellation."""
    try:
        return await coro
    except Exception:
        raise
    except BaseException as exc:
        asyncio = sys.modules.get("asyncio")
        if asyncio is not None and isinstance(exc, asyncio.CancelledError):
            raise
        raise ModelExit(exc) from None


def type_name(exc_type: type) -> str:
    """The C-level ``tp_name``: plain ``__name__`` for classes defined in Python,
    ``module.Name`` for extension types outside builtins."""
    if exc_type.__flags__ & _HEAPTYPE or exc_type.__module__ == "builtins":
        return exc_type.__name__
    return f"{exc_type.__module__}.{exc_type.__qualname__}"


def _hidden(filename: str) -> bool:
    return filename.startswith(_HIDDEN_DIRS) or filename.startswith(_HIDDEN_PREFIXES)


def _frames(tb: Optional[TracebackType]) -> List[traceback.FrameSummary]:
    """The model's frames, innermost first: ours and the import machinery dropped, and the
    standard library's machinery when ours called it (or it is the outermost frame)."""
    frames = []
    called_from_ours = True  # the outermost frame was called by the stub
    for f in traceback.extract_tb(tb):
        if _hidden(f.filename):
            called_from_ours = f.filename.startswith(_OURS) or called_from_ours
            continue
        if called_from_ours and f.filename.startswith(_MACHINERY):
            continue
        called_from_ours = False
        frames.append(f)
    frames.reverse()
    return frames


def format_exception(exc: BaseException, nested: bool = False) -> str:
    """The error text of an exception, as pybind11 renders it in the original's errors:
    ``<EMPTY MESSAGE>`` for an empty ``str(exc)`` (``assert x``, ``raise KeyError()``); when
    ``str()`` itself raises, a placeholder, and that exception rendered after the frames."""
    if isinstance(exc, ModelExit):
        exc = exc.exc
    failure: Optional[Exception] = None
    try:
        message = str(exc) or "<EMPTY MESSAGE>"
    except Exception as e:
        message, failure = "<MESSAGE UNAVAILABLE DUE TO ANOTHER EXCEPTION>", e
    text = f"{type_name(type(exc))}: {message}"
    frames = _frames(exc.__traceback__)
    if frames:
        text += "\n\nAt:\n" + "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in frames)
    if failure is not None and not nested:
        text += "\nMESSAGE UNAVAILABLE DUE TO EXCEPTION: " + format_exception(failure, True)
    return text
