"""Triton data type codes and their numpy counterparts (spec §8)."""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

TYPE_INVALID = 0
TYPE_BOOL = 1
TYPE_UINT8 = 2
TYPE_UINT16 = 3
TYPE_UINT32 = 4
TYPE_UINT64 = 5
TYPE_INT8 = 6
TYPE_INT16 = 7
TYPE_INT32 = 8
TYPE_INT64 = 9
TYPE_FP16 = 10
TYPE_FP32 = 11
TYPE_FP64 = 12
TYPE_BYTES = 13
TYPE_BF16 = 14

# Code -> numpy scalar type, exactly what triton_to_numpy_type returns.
_CODE_TO_NUMPY: Dict[int, Any] = {
    TYPE_BOOL: np.bool_,
    TYPE_UINT8: np.uint8,
    TYPE_UINT16: np.uint16,
    TYPE_UINT32: np.uint32,
    TYPE_UINT64: np.uint64,
    TYPE_INT8: np.int8,
    TYPE_INT16: np.int16,
    TYPE_INT32: np.int32,
    TYPE_INT64: np.int64,
    TYPE_FP16: np.float16,
    TYPE_FP32: np.float32,
    TYPE_FP64: np.float64,
    TYPE_BYTES: np.object_,
}

# Fixed-size codes -> little-endian numpy dtype used to view wire bytes.
WIRE_DTYPE: Dict[int, np.dtype] = {
    code: np.dtype(t).newbyteorder("<") for code, t in _CODE_TO_NUMPY.items() if code != TYPE_BYTES
}
WIRE_DTYPE[TYPE_BF16] = np.dtype("<u2")  # raw storage only; as_numpy() refuses BF16

# numpy dtype.char -> code, the hot-path lookup for Tensor(name, array).
_CHAR_TO_CODE: Dict[str, int] = {
    np.dtype(t).char: c for c, t in _CODE_TO_NUMPY.items() if c != TYPE_BYTES
}
_CHAR_TO_CODE["O"] = TYPE_BYTES
_CHAR_TO_CODE["S"] = TYPE_BYTES
# Platform aliases ('l'/'q', 'L'/'Q', 'i'...) all map through dtype.num, so fill by num too.
_NUM_TO_CODE: Dict[int, int] = {
    np.dtype(t).num: c for c, t in _CODE_TO_NUMPY.items() if c != TYPE_BYTES
}
for _ch in "bBhHiIlLqQ":
    _dt = np.dtype(_ch)
    for _c, _t in _CODE_TO_NUMPY.items():
        if _c != TYPE_BYTES and np.dtype(_t) == _dt:
            _CHAR_TO_CODE[_ch] = _c
            _NUM_TO_CODE[_dt.num] = _c

TRITON_STRING_TO_NUMPY: Dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

# Model-config names and KServe names, for tools and messages.
CONFIG_NAME_TO_CODE: Dict[str, int] = {
    "TYPE_INVALID": TYPE_INVALID,
    "TYPE_BOOL": TYPE_BOOL,
    "TYPE_UINT8": TYPE_UINT8,
    "TYPE_UINT16": TYPE_UINT16,
    "TYPE_UINT32": TYPE_UINT32,
    "TYPE_UINT64": TYPE_UINT64,
    "TYPE_INT8": TYPE_INT8,
    "TYPE_INT16": TYPE_INT16,
    "TYPE_INT32": TYPE_INT32,
    "TYPE_INT64": TYPE_INT64,
    "TYPE_FP16": TYPE_FP16,
    "TYPE_FP32": TYPE_FP32,
    "TYPE_FP64": TYPE_FP64,
    "TYPE_STRING": TYPE_BYTES,
    "TYPE_BF16": TYPE_BF16,
}
CODE_TO_KSERVE_NAME: Dict[int, str] = {
    TYPE_INVALID: "INVALID",
    TYPE_BOOL: "BOOL",
    TYPE_UINT8: "UINT8",
    TYPE_UINT16: "UINT16",
    TYPE_UINT32: "UINT32",
    TYPE_UINT64: "UINT64",
    TYPE_INT8: "INT8",
    TYPE_INT16: "INT16",
    TYPE_INT32: "INT32",
    TYPE_INT64: "INT64",
    TYPE_FP16: "FP16",
    TYPE_FP32: "FP32",
    TYPE_FP64: "FP64",
    TYPE_BYTES: "BYTES",
    TYPE_BF16: "BF16",
}


def triton_to_numpy_type(data_type: int) -> Optional[Any]:
    """numpy type for a Triton type code 1..13, ``None`` for anything else."""
    try:
        return _CODE_TO_NUMPY.get(data_type)
    except TypeError:  # unhashable argument
        return None


# numpy_to_triton_type compares with ==, in this order, as the original's pure-Python helper
# does: a dtype or numpy scalar type equal to one of these matches; Python's own types (bool,
# int, float, bytes, object), a sized 'S7' or a platform alias unequal to the sized type
# (np.longlong) do not, and what == makes of anything else (an array) is numpy's.
_NUMPY_TO_TRITON_ORDER = [(t, c) for c, t in _CODE_TO_NUMPY.items()] + [(np.bytes_, TYPE_BYTES)]


def numpy_to_triton_type(data_type: Any) -> Optional[int]:
    """Triton type code for a numpy scalar type or dtype; ``np.object_``/``np.bytes_`` -> 13,
    ``None`` for anything no type of the table equals."""
    for np_type, code in _NUMPY_TO_TRITON_ORDER:
        if data_type == np_type:
            return code
    return None


def code_of_dtype(data_type: Any) -> Optional[int]:
    """Triton code for anything numpy makes a dtype of (``bool``, ``int``, ``'f4'``, a sized
    ``'S7'``...), ``None`` when unsupported: the lenient form for pybackend's own tools."""
    if data_type is None:  # np.dtype(None) would be float64
        return None
    try:
        dt = np.dtype(data_type)
    except (TypeError, ValueError):
        return None
    if dt.kind in "OS":
        return TYPE_BYTES
    if dt.byteorder == ">":
        return None
    return _NUM_TO_CODE.get(dt.num)


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """``TRITON_STRING_TO_NUMPY[s]`` (KeyError for unknown names such as TYPE_BF16)."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def code_of_array(a: np.ndarray) -> Optional[int]:
    """Triton code for an array's dtype (any byte order), ``None`` when unsupported."""
    dt = a.dtype
    code = _CHAR_TO_CODE.get(dt.char)
    if code is None and dt.name == "bfloat16":  # ml_dtypes.bfloat16 (UV-39)
        return TYPE_BF16
    return code
