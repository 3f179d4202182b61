"""The public pb_utils API type-checks (runs where mypy is installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_mypy_is_clean() -> None:
    api = pytest.importorskip("mypy.api")
    targets = [
        "pybackend/utils",
        "pybackend/ipc",
        "pybackend/stub",
        "triton_python_backend_utils.py",
    ]
    out, err, status = api.run(
        ["--ignore-missing-imports", "--no-incremental", *[str(REPO / t) for t in targets]]
    )
    assert status == 0, out + err


def test_package_is_marked_typed() -> None:
    assert (REPO / "pybackend" / "py.typed").is_file()
