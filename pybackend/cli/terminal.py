"""Output conventions of the ``pybackend`` command: colour and aligned tables only when
stdout is a terminal (and ``NO_COLOR`` is unset), plain tab-free text when piped, so that
``grep`` and scripts see stable lines."""

from __future__ import annotations

import os
import sys
from typing import IO, Optional, Sequence

_CODES = {"red": "31", "yellow": "33", "green": "32", "bold": "1", "dim": "2"}


def is_terminal(stream: Optional[IO[str]] = None) -> bool:
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def use_colour(stream: Optional[IO[str]] = None) -> bool:
    return is_terminal(stream) and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def paint(text: str, colour: str, stream: Optional[IO[str]] = None) -> str:
    """``text`` in ``colour`` (red, yellow, green, bold, dim) on a terminal, else unchanged."""
    if not use_colour(stream):
        return text
    return f"\033[{_CODES[colour]}m{text}\033[0m"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell (the last column is not padded); cells that
    span lines are cut to their first line plus an ellipsis."""
    cells = [list(header)] + [[_one_line(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, row in enumerate(cells):
        padded = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1])] + [row[-1]]
        lines.append("  ".join(padded).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _one_line(text: str) -> str:
    first, _, rest = str(text).partition("\n")
    return first + (" ..." if rest else "")
