"""``NAME:DTYPE[:DIMS]``, the tensors `pybackend new` declares, and the data type names
the ``pybackend`` command accepts (Triton's wire names; ``STRING`` and ``TYPE_*`` too)."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

from pybackend.errors import PybackendError

#: Wire name -> numpy type name, for the types a generated model can compute with.
NUMPY_NAME = {
    "BOOL": "bool_", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32",
    "UINT64": "uint64", "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
    "FP16": "float16", "FP32": "float32", "FP64": "float64", "BYTES": "object_",
}  # fmt: skip


class SpecError(PybackendError):
    """A tensor given on the command line that cannot be used."""


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # wire name: FP32, BYTES...
    dims: List[int]

    @property
    def config_type(self) -> str:
        """As config.pbtxt spells it (BYTES is TYPE_STRING there)."""
        return "TYPE_STRING" if self.dtype == "BYTES" else f"TYPE_{self.dtype}"

    @property
    def numpy(self) -> str:
        return f"np.{NUMPY_NAME[self.dtype]}"


def wire_name(text: str) -> str:
    """FP32, TYPE_FP32, fp32 -> FP32; STRING and TYPE_STRING -> BYTES."""
    name = text.strip().upper()
    name = name[len("TYPE_") :] if name.startswith("TYPE_") else name
    return "BYTES" if name == "STRING" else name


def parse_spec(text: str, default_dims: Optional[Sequence[int]]) -> TensorSpec:
    """``default_dims`` None: dims stay empty when the text gives none (an output then
    takes its input's, see templates.Model)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise SpecError(f"{text!r}: expected NAME:DTYPE or NAME:DTYPE:DIMS, e.g. INPUT0:FP32:4,4")
    name, dtype = parts[0], wire_name(parts[1])
    if dtype not in NUMPY_NAME:
        raise SpecError(
            f"{text!r}: data type {parts[1]!r} is not one of {', '.join(NUMPY_NAME)} (STRING "
            "is BYTES; BF16 needs ml_dtypes, so write that model by hand)"
        )
    dims = list(default_dims or [])
    if len(parts) == 3:
        try:
            dims = [int(d) for d in parts[2].split(",")]
        except ValueError:
            dims = []
        if not dims or any(d < 1 and d != -1 for d in dims):
            raise SpecError(
                f"{text!r}: DIMS must be comma-separated sizes, -1 for any size (e.g. -1,3)"
            )
    return TensorSpec(name, dtype, dims)


def parse_specs(
    texts: Sequence[str], defaults: Sequence[str], dims: Optional[Sequence[int]]
) -> List[TensorSpec]:
    specs = [parse_spec(t, dims) for t in (texts or defaults)]
    names = [s.name for s in specs]
    for name in names:
        if names.count(name) > 1:
            raise SpecError(f"tensor name {name!r} is given twice")
    return specs


def variables(specs: Sequence[TensorSpec]) -> List[str]:
    """Python names for the tensors' arrays in generated code: the tensor name in lower
    case where that is an identifier, else ``tensor<i>``; never two alike."""
    out: List[str] = []
    for i, spec in enumerate(specs):
        var = re.sub(r"\W", "_", spec.name.lower())
        if not var.isidentifier() or keyword.iskeyword(var) or var in out or var in _TAKEN:
            var = f"tensor{i}"
        out.append(var)
    return out


# Names the generated code uses itself.
_TAKEN = {
    "np", "pb_utils", "json", "request", "requests", "responses", "sender", "config", "self",
    "r", "n", "i", "start", "rows", "call", "answer",
}  # fmt: skip
