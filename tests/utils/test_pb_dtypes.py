"""Type-code helpers of pb_utils (spec §3.1 and §8)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any, Callable

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


def _originals_numpy_to_triton_type() -> Callable[[Any], Any]:
    """The original's own helper, from the wheel's triton_python_backend_utils.py: a plain
    Python function, compiled alone (the module imports the original's C extension)."""
    spec = importlib.util.find_spec("pytriton")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    source = (root / "tritonserver/backends/python/triton_python_backend_utils.py").read_text()
    (func,) = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == "numpy_to_triton_type"
    ]
    namespace: dict[str, Any] = {"np": np}
    exec(compile(ast.Module(body=[func], type_ignores=[]), "original", "exec"), namespace)
    return namespace["numpy_to_triton_type"]


ODD_TYPES = [
    bool, int, float, bytes, object, str, None, 1, "float32", "f4",
    np.bytes_, np.str_, np.complex64, np.void, np.datetime64, np.intc, np.longlong, np.uint,
    np.dtype("S7"), np.dtype("S"), np.dtype(object), np.dtype(bool), np.dtype(">i4"),
    np.dtype("U3"), np.dtype(np.longlong), np.float32(1), np.array([1, 2]),
]  # fmt: skip


@pytest.mark.parametrize("data_type", ODD_TYPES, ids=repr)
def test_numpy_to_triton_type_answers_as_the_originals_helper(data_type: Any) -> None:
    """Compared with the original's helper itself, run here under this numpy: Python's own
    types, sized and aliased dtypes and strings give what its comparisons give."""
    original = _originals_numpy_to_triton_type()

    def outcome(helper: Callable[[Any], Any]) -> Any:
        try:
            return helper(data_type)
        except Exception as e:  # an array compared element-wise: numpy's ValueError
            return type(e)

    assert outcome(pb_utils.numpy_to_triton_type) == outcome(original)


def test_numpy_to_triton_special_cases() -> None:
    assert pb_utils.numpy_to_triton_type(np.bytes_) == 13
    assert pb_utils.numpy_to_triton_type(np.dtype("S")) == 13
    assert pb_utils.numpy_to_triton_type(np.dtype("S7")) is None  # as the original's ==
    assert pb_utils.numpy_to_triton_type(bool) is None
    assert pb_utils.numpy_to_triton_type(np.str_) is None
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
