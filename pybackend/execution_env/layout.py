"""What makes a directory a Python environment here: an interpreter under bin/."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

# Looked for in this order; conda prefixes and venvs have both.
PYTHON_NAMES = ("python3", "python")


def python_of(prefix: Path) -> Optional[Path]:
    """<prefix>/bin/python3 (or bin/python), None where there is neither."""
    return next((prefix / "bin" / n for n in PYTHON_NAMES if (prefix / "bin" / n).exists()), None)
