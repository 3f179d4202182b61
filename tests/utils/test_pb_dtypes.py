"""Type-code helpers of pb_utils (spec §3.1 and §8)."""

from __future__ import annotations

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils

CODES = [
    (1, np.bool_),
    (2, np.uint8),
    (3, np.uint16),
    (4, np.uint32),
    (5, np.uint64),
    (6, np.int8),
    (7, np.int16),
    (8, np.int32),
    (9, np.int64),
    (10, np.float16),
    (11, np.float32),
    (12, np.float64),
    (13, np.object_),
]


@pytest.mark.parametrize(("code", "np_type"), CODES)
def test_triton_to_numpy_and_back(code: int, np_type: type) -> None:
    assert pb_utils.triton_to_numpy_type(code) is np_type
    assert pb_utils.numpy_to_triton_type(np_type) == code
    assert pb_utils.numpy_to_triton_type(np.dtype(np_type)) == code


@pytest.mark.parametrize("code", [0, 14, 15, -1, "x", None])
def test_unknown_codes_give_none(code: object) -> None:
    assert pb_utils.triton_to_numpy_type(code) is None


def test_numpy_to_triton_special_cases() -> None:
    assert pb_utils.numpy_to_triton_type(np.bytes_) == 13
    assert pb_utils.numpy_to_triton_type(np.dtype("S7")) == 13
    assert pb_utils.numpy_to_triton_type(np.str_) is None
    assert pb_utils.numpy_to_triton_type(np.complex64) is None
    assert pb_utils.numpy_to_triton_type("float32") is None
    assert pb_utils.numpy_to_triton_type(np.dtype(np.intc)) == 8
    assert pb_utils.numpy_to_triton_type(np.dtype(np.longlong)) == 9


def test_triton_string_to_numpy() -> None:
    assert pb_utils.triton_string_to_numpy("TYPE_BOOL") is bool
    assert pb_utils.triton_string_to_numpy("TYPE_FP16") is np.float16
    assert pb_utils.triton_string_to_numpy("TYPE_STRING") is np.object_
    with pytest.raises(KeyError):
        pb_utils.triton_string_to_numpy("TYPE_BF16")
    assert set(pb_utils.TRITON_STRING_TO_NUMPY) == {
        "TYPE_BOOL",
        "TYPE_UINT8",
        "TYPE_UINT16",
        "TYPE_UINT32",
        "TYPE_UINT64",
        "TYPE_INT8",
        "TYPE_INT16",
        "TYPE_INT32",
        "TYPE_INT64",
        "TYPE_FP16",
        "TYPE_FP32",
        "TYPE_FP64",
        "TYPE_STRING",
    }
