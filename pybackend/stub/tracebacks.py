"""Exceptions rendered the way the original backend (pybind11) renders them:
``<Type>: <str(exc)>\\n\\nAt:\\n  <file>(<line>): <function>\\n`` innermost frame first."""

from __future__ import annotations

import importlib
import os
import traceback
from types import TracebackType
from typing import List, Optional

# Frames of pybackend itself and of the import machinery are not the model's: pybind11 in
# the original never sees them (its C++ calls into Python directly, and CPython strips
# importlib's frames from import errors).
_HIDDEN_DIRS = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep,
)
_HIDDEN_PREFIXES = ("<frozen importlib",)
_HEAPTYPE = 1 << 9


def type_name(exc_type: type) -> str:
    """The C-level ``tp_name``: plain ``__name__`` for classes defined in Python,
    ``module.Name`` for extension types outside builtins."""
    if exc_type.__flags__ & _HEAPTYPE or exc_type.__module__ == "builtins":
        return exc_type.__name__
    return f"{exc_type.__module__}.{exc_type.__qualname__}"


def _frames(tb: Optional[TracebackType]) -> List[traceback.FrameSummary]:
    frames = [
        f
        for f in traceback.extract_tb(tb)
        if not f.filename.startswith(_HIDDEN_DIRS) and not f.filename.startswith(_HIDDEN_PREFIXES)
    ]
    frames.reverse()
    return frames


def format_exception(exc: BaseException) -> str:
    text = f"{type_name(type(exc))}: {exc}"
    frames = _frames(exc.__traceback__)
    if frames:
        text += "\n\nAt:\n" + "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in frames)
    return text
