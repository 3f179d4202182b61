"""``Tensor``, one input or output of a bound model (``pytriton.model_config.tensor``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One input or output: shape without the batch dimension, numpy dtype (``bytes`` or
    ``np.bytes_``/``object`` for strings), name (default INPUT_<n> / OUTPUT_<n>).
    device (pybackend's addition): "cuda" gives the callable this input as a torch tensor
    (cupy array without torch) on the instance's GPU, see docs/pytriton.md; "cpu" (the
    default) as a numpy array."""

    shape: tuple
    dtype: Any
    name: Optional[str] = None
    optional: Optional[bool] = False
    device: str = "cpu"

    def __post_init__(self) -> None:
        # np.dtype('float32') and np.float32 alike become the scalar type.
        if isinstance(self.dtype, np.dtype):
            object.__setattr__(self, "dtype", self.dtype.type)
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
