"""The enums of pb_utils (``TritonError`` codes, ``Logger`` levels, ``MetricFamily`` kinds,
memory types) print as the original's: there each is a pybind11 enum, which prints as
``Type.MEMBER`` (an IntEnum prints its number on Python 3.11+ and ``Type.MEMBER`` before), so
that a model's log line or message with one reads the same under both backends."""

from __future__ import annotations

import enum


class PybindEnum(enum.IntEnum):
    """An IntEnum that prints as a pybind11 enum of the same type name: ``str()``, an
    f-string and ``format(x, "")`` give ``Type.MEMBER``, ``repr()`` ``<Type.MEMBER: n>``, and
    every member is true (a pybind11 enum object, value 0 included). It stays an int in
    everything else, laxer than the original (which refuses ``<`` between members)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {int(self)}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)

    def __bool__(self) -> bool:
        return True
