"""Where things stand in a model's source: tests that expect a file and line (tracebacks,
log records) find the line by a ``# LINE:<marker>`` comment, not by a number that any edit
of the model would shift."""

from __future__ import annotations

import pathlib


def marker_line(path: pathlib.Path, marker: str) -> int:
    """Line number (from 1) of the source line of ``path`` tagged ``# LINE:<marker>``."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.rstrip().endswith(f"# LINE:{marker}"):
            return number
    raise AssertionError(f"marker {marker} not in {path}")
