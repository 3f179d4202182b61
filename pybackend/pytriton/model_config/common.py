"""The batchers, queue policies, warmup and sequence classes of a model's configuration
(``pytriton.model_config.common``, where PyTriton keeps them; ``ModelWarmup`` and
``WarmupInput`` are importable only from here in PyTriton 0.7)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..exceptions import PyTritonBadParameterError


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


_RANDOM_INT_RANGES = {
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.uint16): (0, 65535),
}
_RANDOM_CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789")


def _from_file(warmup_input: WarmupInput, batch_size: int) -> np.ndarray:
    shape = tuple(warmup_input.shape)
    data = np.load(str(warmup_input.input_data_file))
    if data.shape != (batch_size, *shape):
        if data.ndim == len(shape):  # one sample: repeated batch_size times
            data = np.repeat(data[np.newaxis, ...], batch_size, axis=0)
        elif data.shape[1:] == shape:  # a batch: repeated and cut to batch_size
            repeats = -(-batch_size // data.shape[0])
            data = np.tile(data, (repeats,) + (1,) * (data.ndim - 1))[:batch_size]
        else:
            raise PyTritonBadParameterError(
                f"Input data file shape {data.shape} doesn't match expected shape "
                f"{(batch_size, *shape)}"
            )
    return data.astype(warmup_input.dtype)


def _random(dtype: Any, shape: Tuple[int, ...]) -> np.ndarray:
    kind = np.dtype(dtype)
    if kind == np.bool_:
        return np.random.choice([True, False], size=shape)
    if np.issubdtype(kind, np.integer):
        low, high = _RANDOM_INT_RANGES.get(kind, (0, 100))
        return np.random.randint(low, high, size=shape, dtype=kind)
    if np.issubdtype(kind, np.floating):
        return np.random.random(shape).astype(kind)
    if kind.kind in ("S", "O"):  # strings: 8 to 32 random letters and digits each
        words = [
            "".join(np.random.choice(_RANDOM_CHARS, np.random.randint(8, 33))).encode("utf-8")
            for _ in range(int(np.prod(shape)))
        ]
        return np.array(words, dtype=dtype).reshape(shape)
    return np.zeros(shape, dtype=kind)


def generate_warmup_data(warmup_input: WarmupInput, batch_size: int) -> np.ndarray:
    """One warmup input as a batch of ``batch_size`` samples (PyTriton's helper): the
    ``input_data_file``'s sample(s), zeros, or random values of its dtype."""
    if not (warmup_input.zero_data or warmup_input.random_data or warmup_input.input_data_file):
        raise PyTritonBadParameterError(
            "One of 'zero_data', 'random_data', or 'input_data_file' must be provided for "
            "warmup input."
        )
    shape = (batch_size, *tuple(warmup_input.shape))
    if warmup_input.input_data_file:
        return _from_file(warmup_input, batch_size)
    if warmup_input.zero_data:
        return np.zeros(shape, dtype=warmup_input.dtype)
    return _random(warmup_input.dtype, shape)


def generate_warmup_requests(
    model_warmup: List[ModelWarmup], input_specs: List, outputs_specs: List
) -> List[Dict[str, np.ndarray]]:
    """Each ModelWarmup's ``count`` requests, one dict of input name to batch each, in
    order. The specs are accepted and not checked, as in PyTriton."""
    return [
        {
            name: generate_warmup_data(spec, warmup.batch_size)
            for name, spec in warmup.inputs.items()
        }
        for warmup in model_warmup or []
        for _ in range(warmup.count)
    ]
