"""The checks the server makes on a request's inputs before the model sees it (names,
datatypes, shapes against config.pbtxt), so a test that feeds the harness what the server
would refuse fails the same way instead of passing."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ..utils.dtypes import numpy_to_triton_type
from ..utils.tensor import Tensor
from .harness_errors import InferError

TRITON_NAME = {  # numpy_to_triton_type's numbers -> the wire names Triton's messages use
    1: "BOOL", 2: "UINT8", 3: "UINT16", 4: "UINT32", 5: "UINT64", 6: "INT8", 7: "INT16",
    8: "INT32", 9: "INT64", 10: "FP16", 11: "FP32", 12: "FP64", 13: "BYTES", 14: "BF16",
}  # fmt: skip


def check_inputs(config: Mapping[str, Any], model: str, tensors: List[Tensor]) -> None:
    """Raise :class:`InferError` (INVALID_ARG) where the server would refuse ``tensors``."""
    declared: Dict[str, Mapping[str, Any]] = {i["name"]: i for i in config.get("input", [])}
    if not declared:
        return  # no inputs declared (auto-complete fills them in a real server): no checks
    batch = int(config.get("max_batch_size", 0) or 0) > 0
    given = {t.name(): t for t in tensors}
    missing = [n for n, s in declared.items() if n not in given and not s.get("optional")]
    required = len(declared) - sum(1 for s in declared.values() if s.get("optional"))
    if missing or not required <= len(given) <= len(declared):
        # Triton counts first, so an extra input reads as a count mismatch too.
        raise InferError(
            f"expected {len(declared)} inputs but got {len(given)} inputs for model '{model}'. "
            f"Got input(s) {sorted(given)}, but missing required input(s) {missing}. Please "
            "provide all required input(s).",
            3,
        )
    for name, tensor in given.items():
        spec = declared.get(name)
        if spec is None:
            raise InferError(f"unexpected inference input '{name}' for model '{model}'", 3)
        want = str(spec.get("data_type", "")).replace("TYPE_", "").replace("STRING", "BYTES")
        got = TRITON_NAME.get(int(numpy_to_triton_type(tensor.as_numpy().dtype) or 0), "?")
        if want and got != want:
            raise InferError(
                f"inference input '{name}' data-type is '{got}', but model '{model}' expects "
                f"'{want}'",
                3,
            )
        dims = [int(d) for d in spec.get("dims", [])]
        expected = ([-1] if batch else []) + dims
        shape = list(tensor.shape())
        if len(shape) != len(expected) or any(e != -1 and e != s for e, s in zip(expected, shape)):
            note = (
                " NOTE: Setting a non-zero max_batch_size in the model config requires a batch "
                "dimension to be prepended to each input shape."
                if batch
                else ""
            )
            raise InferError(
                f"unexpected shape for input '{name}' for model '{model}'. Expected "
                f"{_dims(expected)}, got {_dims(shape)}.{note}",
                3,
            )


def _dims(shape: List[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
