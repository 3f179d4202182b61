"""The model description users pass to ``Triton.bind`` (``pytriton.model_config``): the same
dataclasses, fields and defaults as PyTriton's, in the same submodules (``.common``,
``.model_config``, ``.tensor``), so imports such as
``from pytriton.model_config.common import DynamicBatcher`` carry over with the prefix."""

from .common import (
    DeviceKind,
    DynamicBatcher,
    ModelWarmup,
    QueuePolicy,
    SequenceBatcher,
    SequenceControl,
    SequenceControlInput,
    SequenceStrategy,
    TimeoutAction,
    WarmupInput,
)
from .model_config import ModelConfig
from .tensor import Tensor

__all__ = [
    "DeviceKind",
    "DynamicBatcher",
    "ModelConfig",
    "ModelWarmup",
    "QueuePolicy",
    "SequenceBatcher",
    "SequenceControl",
    "SequenceControlInput",
    "SequenceStrategy",
    "Tensor",
    "TimeoutAction",
    "WarmupInput",
]
