"""TritonError and TritonModelException."""

from __future__ import annotations

import pytest

import triton_python_backend_utils as pb_utils


def test_codes() -> None:
    names = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED"]
    names += ["ALREADY_EXISTS", "CANCELLED"]
    assert [int(getattr(pb_utils.TritonError, n)) for n in names] == list(range(8))


def test_triton_error_value_object() -> None:
    e = pb_utils.TritonError("boom")
    assert e.message() == "boom" and e.code() == pb_utils.TritonError.INTERNAL
    e = pb_utils.TritonError("stop", pb_utils.TritonError.CANCELLED)
    assert e.code() == 7
    e = pb_utils.TritonError(message=b"m", code=pb_utils.TritonError.INVALID_ARG)
    assert e.code() == 3 and e.message() == "m"
    assert not isinstance(e, BaseException)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        pb_utils.TritonError("x", 3)  # type: ignore[arg-type]  # an enum member only, as the original
    with pytest.raises(TypeError):
        pb_utils.TritonError(error="pytriton's wrong kwarg")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        pb_utils.TritonError("x", 99)  # type: ignore[arg-type]


def test_model_exception() -> None:
    assert issubclass(pb_utils.TritonModelException, Exception)
    with pytest.raises(pb_utils.TritonModelException, match="x"):
        raise pb_utils.TritonModelException("x")
