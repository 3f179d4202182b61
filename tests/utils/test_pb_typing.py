"""The public pb_utils API type-checks (mypy is in the test extras and `make test`)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

REPO = Path(__file__).resolve().parents[2]


def test_mypy_is_clean() -> None:
    targets = [
        "pybackend/utils",
        "pybackend/ipc",
        "pybackend/stub",
        "pybackend/testing",
        "pybackend/pytriton",
        "pybackend/validate",
        "pybackend/cli",
        "pybackend/errors.py",
        "triton_python_backend_utils.py",
    ]
    out, err, status = api.run(
        ["--ignore-missing-imports", "--no-incremental", *[str(REPO / t) for t in targets]]
    )
    assert status == 0, out + err


def test_package_is_marked_typed() -> None:
    assert (REPO / "pybackend" / "py.typed").is_file()
