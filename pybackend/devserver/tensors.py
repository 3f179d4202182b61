"""Tensors as the KServe v2 protocol carries them: a datatype name, a shape and raw
little-endian bytes (BYTES elements each behind a 4-byte length), to and from numpy
arrays. HTTP's binary extension and gRPC's raw contents share this layout."""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from ..testing.inputs import TRITON_NAME
from ..utils.bytes_codec import BytesTensorError, decode_object_array, serialize_to_bytes
from ..utils.dtypes import TYPE_BF16, WIRE_DTYPE, code_of_array
from ..utils.errors import ErrorCode
from ..utils.tensor import _bfloat16
from .errors import ServeError

#: Fixed-size datatypes by wire name (BF16 apart: numpy has no bfloat16 of its own).
FIXED: Dict[str, np.dtype] = {
    TRITON_NAME[code]: dtype for code, dtype in WIRE_DTYPE.items() if code != TYPE_BF16
}


def wire_name(config_type: str) -> str:
    """``TYPE_FP32`` -> ``FP32``; ``TYPE_STRING`` -> ``BYTES`` (config.pbtxt -> protocol)."""
    name = config_type[5:] if config_type.startswith("TYPE_") else config_type
    return "BYTES" if name == "STRING" else name


def datatype_of(array: np.ndarray, declared: Optional[str] = None) -> str:
    """An output's datatype: the config's when it declares the output, else the array's."""
    if declared:
        return wire_name(declared)
    name = TRITON_NAME.get(int(code_of_array(array) or 0))
    if name is None:
        raise ServeError(f"unsupported data type {array.dtype} of an output", ErrorCode.INTERNAL)
    return name


def element_count(shape: Sequence[int]) -> int:
    return int(math.prod(int(d) for d in shape))


def bfloat16() -> Any:
    """pb_utils' bfloat16 dtype (ml_dtypes), or the reason there is none."""
    dtype = _bfloat16()
    if dtype is None:
        raise ServeError(
            "BF16 tensors need the ml_dtypes package in the server's environment "
            "(pip install ml_dtypes)",
            ErrorCode.UNSUPPORTED,
        )
    return dtype


def from_raw(
    name: str, datatype: str, shape: Sequence[int], raw: Any, model: str, request_id: str = ""
) -> np.ndarray:
    """An input tensor from its raw bytes; a size that does not fit the shape is refused."""
    count = element_count(shape)
    if datatype == "BYTES":
        try:
            return decode_object_array(raw, count).reshape(shape)
        except BytesTensorError as e:
            raise ServeError(
                f"{e} in input '{name}' for model '{model}'", ErrorCode.INVALID_ARG
            ) from None
    dtype = bfloat16() if datatype == "BF16" else FIXED.get(datatype)
    if dtype is None:
        raise ServeError(
            f"invalid datatype '{datatype}' of input '{name}' for model '{model}'",
            ErrorCode.INVALID_ARG,
        )
    size = len(memoryview(raw).cast("B"))
    if size != count * dtype.itemsize:
        raise ServeError(
            f"[request id: {request_id or '<id_unknown>'}] "
            f"input byte size mismatch for input '{name}' for model '{model}'. "
            f"Expected {count * dtype.itemsize}, got {size}",
            ErrorCode.INVALID_ARG,
        )
    # A copy: the model may keep the array past the request's buffer.
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def to_raw(array: np.ndarray, datatype: str) -> bytes:
    """An output's raw bytes in the protocol's layout."""
    if datatype == "BYTES":
        return serialize_to_bytes(np.asarray(array, dtype=np.object_))
    if datatype == "BF16":
        return np.ascontiguousarray(array).view(np.uint16).astype("<u2").tobytes()
    return np.ascontiguousarray(array, dtype=FIXED[datatype]).tobytes()


def declared_types(config: Mapping[str, Any], section: str) -> Dict[str, str]:
    """Name -> config data type of the config's ``input`` or ``output`` entries."""
    return {str(t["name"]): str(t.get("data_type", "")) for t in config.get(section, [])}
