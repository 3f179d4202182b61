"""What makes a directory a Python environment here: an interpreter under bin/."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Tuple

# Looked for in this order; conda prefixes and venvs have both.
PYTHON_NAMES = ("python3", "python")


def python_of(prefix: Path) -> Optional[Path]:
    """<prefix>/bin/python3 (or bin/python), None where there is neither."""
    return next((prefix / "bin" / n for n in PYTHON_NAMES if (prefix / "bin" / n).exists()), None)


def dangling_link(prefix: Path) -> Optional[Tuple[Path, str]]:
    """(bin/<python>, its target) for an interpreter link whose target is missing (a venv
    packed on another machine), else None."""
    for name in PYTHON_NAMES:
        link = prefix / "bin" / name
        if link.is_symlink() and not link.exists():
            return link, os.path.realpath(link)
    return None
