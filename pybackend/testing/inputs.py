"""The checks the server makes on a request's inputs before the model sees it (names,
datatypes, shapes against config.pbtxt), so a test that feeds the harness what the server
would refuse fails the same way instead of passing."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..utils.dtypes import code_of_array, code_of_dtype
from ..utils.tensor import Tensor
from ..utils.triton_json import ParameterTypeError, parameters_text
from .harness_errors import InferError

TRITON_NAME = {  # Triton's type codes -> the wire names Triton's messages use
    1: "BOOL", 2: "UINT8", 3: "UINT16", 4: "UINT32", 5: "UINT64", 6: "INT8", 7: "INT16",
    8: "INT32", 9: "INT64", 10: "FP16", 11: "FP32", 12: "FP64", 13: "BYTES", 14: "BF16",
}  # fmt: skip


def triton_code(array: Any) -> int:
    """The Triton type code of an array's data (0: none), ml_dtypes' bfloat16 included
    (UV-39: BF16 inputs and outputs are ml_dtypes arrays)."""
    return int(code_of_dtype(array.dtype) or code_of_array(array) or 0)


def as_input_array(value: Any) -> np.ndarray:
    """An input as the model receives it: a pb_utils Tensor's array, or the value as an array
    (text as UTF-8 BYTES, as a client sends it)."""
    if isinstance(value, Tensor):
        return value.as_numpy()
    array = np.asarray(value)
    if array.dtype.kind == "U":
        array = np.char.encode(array, "utf-8").astype(np.object_)
    return array


def check_inputs(
    config: Mapping[str, Any], model: str, tensors: List[Tensor], request_id: str = ""
) -> None:
    """Raise :class:`InferError` (INVALID_ARG) where the server would refuse ``tensors``,
    in tritonserver 2.51's words (checked against it). Like the server, it counts inputs
    and checks names, data types and shapes; a required input left out while the count is
    in range reaches the model (as None from get_input_tensor_by_name). Where the server
    lists several names, its order is that of a hash table: here they are in the order
    given."""
    # No inputs declared (no config.pbtxt, and no auto_complete_config that adds them): the
    # server refuses every input ("expected 0 inputs"), as below.
    declared: Dict[str, Mapping[str, Any]] = {i["name"]: i for i in config.get("input", [])}
    prefix = f"[request id: {request_id or '<id_unknown>'}] "
    batch = int(config.get("max_batch_size", 0) or 0) > 0
    given = {t.name(): t for t in tensors}
    optional = sum(1 for spec in declared.values() if spec.get("optional"))
    required = len(declared) - optional
    if not (required <= len(given) <= len(declared)) or (not optional and len(given) != required):
        missing = [n for n, spec in declared.items() if n not in given and not spec.get("optional")]
        expected = (
            f"expected number of inputs between {required} and {len(declared)}"
            if optional
            else f"expected {len(declared)} inputs"
        )
        raise InferError(
            f"{prefix}{expected} but got {len(given)} inputs for model '{model}'. Got input(s) "
            f"{_names(list(given)) if given else '[]'}, but missing required input(s) "
            f"{_names(missing)}. Please "
            "provide all required input(s).",
            3,
        )
    for name, tensor in given.items():
        spec = declared.get(name)
        if spec is None:
            raise InferError(f"unexpected inference input '{name}' for model '{model}'", 3)
        want = str(spec.get("data_type", "")).replace("TYPE_", "").replace("STRING", "BYTES")
        got = TRITON_NAME.get(triton_code(tensor.as_numpy()), "?")
        if want and got != want:
            raise InferError(
                f"{prefix}inference input '{name}' data-type is '{got}', but model '{model}' "
                f"expects '{want}'",
                3,
            )
        dims = [int(d) for d in spec.get("dims", [])]
        expected_shape = ([-1] if batch else []) + dims
        shape = list(tensor.shape())
        if len(shape) != len(expected_shape) or any(
            e != -1 and e != s for e, s in zip(expected_shape, shape)
        ):
            raise InferError(
                f"{prefix}unexpected shape for input '{name}' for model '{model}'. Expected "
                f"{_dims(expected_shape)}, got {_dims(shape)}. {_BATCH_NOTE if batch else ''}",
                3,
            )
    max_batch = int(config.get("max_batch_size", 0) or 0)
    rows = max((int(t.shape()[0]) for t in given.values() if t.shape()), default=0)
    if batch and rows > max_batch:
        raise InferError(
            f"{prefix}inference request batch-size must be <= {max_batch} for '{model}'", 3
        )


_BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension "
    "to be prepended to each input shape. If you want to specify the full shape including "
    "the batch dim in your input dims config, try setting max_batch_size to zero. See the "
    "model configuration docs for more info on max_batch_size."
)


def _names(names: List[str]) -> str:
    # The server's list: no spaces, and an empty list of missing inputs prints as "]" (sic;
    # an empty list of given inputs prints as "[]": both observed on tritonserver 2.51).
    return "[" + ",".join(f"'{n}'" for n in names) + "]" if names else "]"


def _dims(shape: List[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def parameters_json(parameters: Optional[Mapping[str, Any]]) -> str:
    """A request's parameters as the model's ``request.parameters()`` shows them under the
    server (pybackend/utils/triton_json.py); a value the server refuses is its INVALID_ARG
    error."""
    try:
        return parameters_text(parameters)
    except ParameterTypeError as e:
        raise InferError(str(e), 3) from None
