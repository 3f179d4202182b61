"""Fixtures of the stub tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """Where a test writes its model repository."""
    return tmp_path / "models"
