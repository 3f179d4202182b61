"""The checks the backend makes on the outputs a model returns (names, data types and
shapes against config.pbtxt's ``output`` section; csrc/backend/output_specs.cc), with its
texts, so a model that returns what the server would refuse fails offline too."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

from ..utils.errors import ErrorCode
from .harness_errors import InferError
from .inputs import TRITON_NAME, triton_code


def requested_outputs(
    config: Mapping[str, Any], requested: Sequence[str], model_name: str
) -> List[str]:
    """What Triton asks the model for: the request's outputs, or every declared output
    when the client names none (the model sees them in ``requested_output_names()``). An
    output the config does not declare is refused as the server refuses it."""
    declared = [str(o["name"]) for o in config.get("output", [])]
    for name in requested:
        if name not in declared:
            raise InferError(
                f"unexpected inference output '{name}' for model '{model_name}'",
                ErrorCode.INVALID_ARG,
            )
    return list(requested) if requested else declared


def check_outputs(config: Mapping[str, Any], instance: str, outputs: Mapping[str, Any]) -> None:
    """Raise :class:`InferError` (INVALID_ARG) for the first output the backend refuses;
    ``outputs`` maps names to arrays (all the response holds, requested or not)."""
    declared: Dict[str, Mapping[str, Any]] = {o["name"]: o for o in config.get("output", [])}
    if not declared:
        return  # nothing declared: the backend has nothing to check against
    batched = int(config.get("max_batch_size", 0) or 0) > 0
    for name, value in outputs.items():
        text = _wrong(declared, batched, instance, name, np.asarray(value))
        if text:
            raise InferError(text, ErrorCode.INVALID_ARG)


def _wrong(
    declared: Dict[str, Mapping[str, Any]],
    batched: bool,
    instance: str,
    name: str,
    array: np.ndarray,
) -> str:
    what = f"output '{name}' of model instance '{instance}'"
    spec = declared.get(name)
    if spec is None:
        names = ", ".join(f"'{n}'" for n in declared)
        return (
            f"{what} is not declared in the model configuration (it declares {names}): "
            "return only declared outputs, or add it to config.pbtxt"
        )
    code = triton_code(array)
    actual = "TYPE_STRING" if code == 13 else "TYPE_" + TRITON_NAME.get(code, "INVALID")
    want_type = str(spec.get("data_type", ""))
    if want_type and actual != want_type:
        return (
            f"{what} has data type {actual} but the model configuration declares {want_type}: "
            "convert the array (e.g. numpy astype) or fix config.pbtxt"
        )
    if "reshape" in spec:
        return ""
    dims: List[int] = [int(d) for d in spec.get("dims", [])]
    want = ([-1] if batched else []) + dims
    shape = list(array.shape)
    if len(want) != len(shape) or any(w >= 0 and w != s for w, s in zip(want, shape)):
        return (
            f"{what} has shape {_text(shape)} but the model configuration declares "
            f"{_text(dims)}{' after the batch dimension' if batched else ''} (-1: any size): "
            "reshape the array or fix config.pbtxt"
        )
    return ""


def _text(dims: List[int]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"
