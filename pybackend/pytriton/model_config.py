"""The model description users pass to ``Triton.bind`` (``pytriton.model_config``): the same
dataclasses, fields and defaults as PyTriton's."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, List, Optional, Sequence

import numpy as np


class DeviceKind(enum.Enum):
    KIND_AUTO = "KIND_AUTO"
    KIND_CPU = "KIND_CPU"
    KIND_GPU = "KIND_GPU"


class TimeoutAction(enum.Enum):
    REJECT = "REJECT"
    DELAY = "DELAY"


@dataclasses.dataclass
class QueuePolicy:
    timeout_action: TimeoutAction = TimeoutAction.REJECT
    default_timeout_microseconds: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0


@dataclasses.dataclass
class DynamicBatcher:
    max_queue_delay_microseconds: int = 0
    preferred_batch_size: Optional[list] = None
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: Optional[QueuePolicy] = None
    priority_queue_policy: Optional[Dict[int, QueuePolicy]] = None


@dataclasses.dataclass
class WarmupInput:
    dtype: Any
    shape: Sequence[int]
    zero_data: Optional[bool] = False
    random_data: Optional[bool] = False
    input_data_file: Optional[str] = None


@dataclasses.dataclass
class ModelWarmup:
    name: str
    batch_size: int
    inputs: Dict[str, WarmupInput]
    count: int


@dataclasses.dataclass
class ModelConfig:
    """batching: False serves without a batch dimension (max_batch_size 0)."""

    batching: bool = True
    max_batch_size: int = 4
    batcher: DynamicBatcher = dataclasses.field(default_factory=DynamicBatcher)
    response_cache: bool = False
    decoupled: bool = False
    model_warmup: Optional[List[ModelWarmup]] = None


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One input or output: shape without the batch dimension, numpy dtype (``bytes`` or
    ``np.bytes_``/``object`` for strings), name (default INPUT_<n> / OUTPUT_<n>)."""

    shape: tuple
    dtype: Any
    name: Optional[str] = None
    optional: Optional[bool] = False

    def __post_init__(self) -> None:
        # np.dtype('float32') and np.float32 alike become the scalar type.
        if isinstance(self.dtype, np.dtype):
            object.__setattr__(self, "dtype", self.dtype.type)
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
