"""A Triton model's inputs and outputs as the endpoint sees them (its configuration as
tritonserver reports it), and one request value as the tensor an input declares. The text
and embedding conventions read their models through this."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

#: Triton's config data types, as numpy types (BYTES as object).
NUMPY_TYPES = {
    "TYPE_BOOL": np.bool_,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


TEXT_INPUT, TEXT_OUTPUT = "text_input", "text_output"
_FLOATS = ("TYPE_FP16", "TYPE_FP32", "TYPE_FP64")
#: What an input of a convention holds -> the data types that carry it faithfully, and how
#: to say them.
KINDS: Dict[str, Tuple[Callable[[str], bool], str]] = {
    "text": (lambda t: t == "TYPE_STRING", "TYPE_STRING"),
    "fraction": (lambda t: t in _FLOATS, "a floating-point type (TYPE_FP32)"),
    "whole": (lambda t: "INT" in t, "an integer type (TYPE_INT32)"),
    "flag": (lambda t: t in NUMPY_TYPES and t != "TYPE_STRING", "TYPE_BOOL"),
}
FLOAT_TYPES = _FLOATS


class BadValue(ValueError):
    """A request this model cannot take (a value out of its input's range, an input it needs
    and the request does not give); ``param``: the request's field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Input:
    name: str
    data_type: str  # TYPE_*
    dims: Tuple[int, ...]
    optional: bool


class TritonModel:
    """Name, batching, decoupling, inputs and outputs of a model's configuration."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.name = str(config.get("name", ""))
        self.batched = int(config.get("max_batch_size") or 0) > 0
        self.decoupled = bool((config.get("model_transaction_policy") or {}).get("decoupled"))
        self.inputs: Dict[str, Input] = {
            i["name"]: Input(
                i["name"],
                i.get("data_type", "TYPE_STRING"),
                tuple(int(d) for d in i.get("dims", [])),
                bool(i.get("optional")),
            )
            for i in config.get("input", [])
        }
        #: Output name -> its data type.
        self.outputs: Dict[str, str] = {
            o["name"]: o.get("data_type", "TYPE_STRING") for o in config.get("output", [])
        }

    def unfit(self, kinds: Mapping[str, str]) -> List[str]:
        """The declared inputs of a convention (name -> its kind in KINDS) that the
        endpoint cannot fill faithfully, each with why."""
        found = []
        for name in sorted(kinds.keys() & self.inputs.keys()):
            spec = self.inputs[name]
            fits, wanted = KINDS[kinds[name]]
            if not fits(spec.data_type):
                found.append(f"input '{name}' is {spec.data_type}, not {wanted}")
            elif any(d not in (1, -1) for d in spec.dims):
                found.append(f"input '{name}' has dims {list(spec.dims)}: one element is sent")
        return found

    def arrays(
        self, values: Mapping[str, Any], missing: Callable[[str], str]
    ) -> Dict[str, np.ndarray]:
        """The tensors of one request: each value the model declares, as its input wants
        it; BadValue(``missing(name)``) for a required input without a value."""
        for name, spec in self.inputs.items():
            if not spec.optional and name not in values:
                raise BadValue(missing(name), param=name)
        return {
            name: self.array(self.inputs[name], value)
            for name, value in values.items()
            if name in self.inputs
        }

    def unfillable(self, known: AbstractSet[str]) -> Optional[str]:
        """What is wrong when the model requires inputs outside a convention's ``known``."""
        unknown = sorted(n for n, i in self.inputs.items() if n not in known and not i.optional)
        if not unknown:
            return None
        return "takes required inputs this endpoint cannot fill: " + ", ".join(map(repr, unknown))

    def array(self, spec: Input, value: Any) -> np.ndarray:
        """``value`` as one element in the shape ``spec`` declares (a variable dimension as
        1), under a batch dimension of 1 when the model batches; BadValue when it does not
        fit the input's integer type (numpy would wrap it around)."""
        shape = ([1] if self.batched else []) + [1 for _ in spec.dims]
        dtype = NUMPY_TYPES[spec.data_type]  # the conventions refuse the other types
        if np.issubdtype(dtype, np.integer) and not isinstance(value, bool):
            bounds = np.iinfo(dtype)
            if not bounds.min <= value <= bounds.max:
                raise BadValue(
                    f"{spec.name} {value} is out of the range of model '{self.name}''s "
                    f"input ({spec.data_type}: {bounds.min} to {bounds.max})",
                    param=spec.name,
                )
        return np.full(shape or [1], value, dtype=dtype)


def text_of(value: Any) -> str:
    """One element of a TYPE_STRING tensor as text (UTF-8; bytes that are not, replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def count_of(array: Optional[np.ndarray]) -> Optional[int]:
    """A token count output (its elements summed), or None where the model sent none."""
    return None if array is None or array.size == 0 else int(np.asarray(array).sum())
