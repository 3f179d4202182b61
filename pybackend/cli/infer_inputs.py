"""`pybackend infer`'s ``NAME=VALUE`` arguments as arrays of the data types and shapes the
model's metadata declares: ``NAME=@file.npy``, ``NAME=@file.json``, or inline values
(``1,2,3``, a JSON list ``[[1,2],[3,4]]``, a string for a BYTES input)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

from pybackend.errors import PybackendError


class InputError(PybackendError):
    """An input given on the command line that does not fit the model."""


@dataclass
class InputSpec:
    name: str
    datatype: str
    shape: List[int]  # as the metadata says: with the batch dimension (-1) when batched
    optional: bool = False


def build_inputs(
    given: Sequence[str], specs: Sequence[InputSpec], model: str
) -> Dict[str, np.ndarray]:
    by_name = {s.name: s for s in specs}
    arrays: Dict[str, np.ndarray] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(
                f"{item!r}: give an input as NAME=VALUE, NAME=@file.npy or NAME=@file.json"
            )
        spec = by_name.get(name)
        if spec is None:
            raise InputError(
                f"model '{model}' has no input '{name}' (its inputs: {_listed(specs)})"
            )
        arrays[name] = shaped(_values(value, spec), spec)
    missing = [s for s in specs if s.name not in arrays and not s.optional]
    if missing:
        raise InputError(
            f"model '{model}' needs "
            + ", ".join(f"{s.name} ({s.datatype}, shape {s.shape})" for s in missing)
            + ": give "
            + " ".join(f"{s.name}=..." for s in missing)
        )
    return arrays


def _values(value: str, spec: InputSpec) -> np.ndarray:
    if value.startswith("@"):
        path = Path(value[1:])
        if not path.is_file():
            raise InputError(f"{spec.name}: no file {path}")
        if path.suffix == ".npy":
            return _typed(np.load(path, allow_pickle=spec.datatype == "BYTES"), spec)
        try:
            from_file = json.loads(path.read_text())
        except ValueError as e:
            raise InputError(f"{spec.name}: {path} is not JSON ({e}); use .npy or .json") from None
        return _typed(from_file, spec)
    try:
        data: Any = json.loads(value)
    except ValueError:
        # Not JSON: comma-separated numbers, or for BYTES the text itself.
        data = [value] if spec.datatype == "BYTES" else [_token(v) for v in value.split(",")]
    return _typed(data, spec)


def _token(text: str) -> Any:
    """One comma-separated value as JSON reads it (true, 1, 2.5), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()


def _typed(data: Any, spec: InputSpec) -> np.ndarray:
    from tritonclient.utils import triton_to_np_dtype

    dtype = triton_to_np_dtype(spec.datatype)
    if dtype is None or spec.datatype == "BF16":
        raise InputError(f"{spec.name}: data type {spec.datatype} is not supported here")
    if spec.datatype == "BYTES":
        array = np.array(data, dtype=np.object_)
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in array.reshape(-1)]
        return np.array(flat, dtype=np.object_).reshape(array.shape)
    try:
        return np.array(data).astype(dtype)
    except (TypeError, ValueError) as e:
        raise InputError(f"{spec.name}: {data!r} is not {spec.datatype} data ({e})") from None


def shaped(array: np.ndarray, spec: InputSpec) -> np.ndarray:
    """``array`` in the declared shape: a batch dimension of 1 added where the model batches
    and it is missing, flat values reshaped to a declared fixed shape."""
    want = spec.shape
    if array.ndim == 0:
        array = array.reshape(1)
    if _fits(array.shape, want):
        return array
    if want and want[0] == -1 and _fits((1, *array.shape), want):
        return array.reshape((1, *array.shape))
    fixed = [1 if d == -1 else d for d in want]
    if -1 not in want[1:] and int(np.prod(fixed)) == array.size:
        return array.reshape(fixed)
    raise InputError(
        f"{spec.name}: {array.size} value{'s' if array.size != 1 else ''} of shape "
        f"{list(array.shape)} do not fit its shape {want} (-1: any size)"
    )


def _fits(shape: Sequence[int], want: Sequence[int]) -> bool:
    return len(shape) == len(want) and all(w in (-1, s) for s, w in zip(shape, want))


def _listed(specs: Sequence[InputSpec]) -> str:
    return ", ".join(f"{s.name} ({s.datatype}, {s.shape})" for s in specs) or "none"
