"""Which backend the suite runs against: ours or the ORIGINAL from the nvidia-pytriton wheel."""

from __future__ import annotations

import os

VALID_BACKENDS = ("ours", "original")


def selected_backend() -> str:
    """The backend named by PYBACKEND_TEST_BACKEND (default ``ours``)."""
    value = os.environ.get("PYBACKEND_TEST_BACKEND", "ours").strip() or "ours"
    if value not in VALID_BACKENDS:
        raise RuntimeError(f"PYBACKEND_TEST_BACKEND must be one of {VALID_BACKENDS}, got {value!r}")
    return value


def is_ours() -> bool:
    return selected_backend() == "ours"


def is_original() -> bool:
    return selected_backend() == "original"
