"""The batchers, queue policies, warmup and sequence classes of a model's configuration
(``pytriton.model_config.common``, where PyTriton keeps them; ``ModelWarmup`` and
``WarmupInput`` are importable only from here in PyTriton 0.7)."""

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


class SequenceStrategy(enum.Enum):
    """How Triton's sequence batcher schedules sequences (model_config.proto's
    ``strategy_choice``): DIRECT pins each sequence to one batch slot of one instance;
    OLDEST batches the oldest candidate sequences together dynamically."""

    DIRECT = "direct"
    OLDEST = "oldest"


class SequenceControl(enum.Enum):
    """Kinds of control input (``ModelSequenceBatching.Control.Kind``)."""

    START = "CONTROL_SEQUENCE_START"
    END = "CONTROL_SEQUENCE_END"
    READY = "CONTROL_SEQUENCE_READY"
    CORRID = "CONTROL_SEQUENCE_CORRID"


@dataclasses.dataclass
class SequenceControlInput:
    """A control tensor Triton adds to each request of a sequence (an input the callable
    receives under ``name``, not one the client sends). START, END and READY hold 0 or 1
    as ``dtype`` np.int32, np.float32 or np.bool_; CORRID holds the correlation id as
    np.uint64, np.int64, np.uint32 or np.int32 (string ids need no CORRID input)."""

    name: str
    kind: SequenceControl
    dtype: Any = np.int32


@dataclasses.dataclass
class SequenceBatcher:
    """Triton's sequence batcher (``sequence_batching``), for stateful models: every request
    of a sequence (one correlation id, from START to END) goes to the same instance, in
    order. Fields follow model_config.proto; 0 leaves Triton's default.
    ``max_queue_delay_microseconds`` applies to both strategies;
    ``minimum_slot_utilization`` to DIRECT; ``max_candidate_sequences`` (0: the model's
    max_batch_size), ``preferred_batch_size`` and ``preserve_ordering`` to OLDEST."""

    strategy: SequenceStrategy = SequenceStrategy.DIRECT
    max_sequence_idle_microseconds: int = 0
    control_inputs: List[SequenceControlInput] = dataclasses.field(default_factory=list)
    max_queue_delay_microseconds: int = 0
    minimum_slot_utilization: float = 0.0
    max_candidate_sequences: int = 0
    preferred_batch_size: Optional[list] = None
    preserve_ordering: bool = False


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
