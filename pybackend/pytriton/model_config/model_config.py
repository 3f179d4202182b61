"""``ModelConfig`` (``pytriton.model_config.model_config``)."""

from __future__ import annotations

import dataclasses
from typing import List, Optional

from .common import DynamicBatcher, ModelWarmup, SequenceBatcher


@dataclasses.dataclass
class ModelConfig:
    """batching: False serves without a batch dimension (max_batch_size 0).
    sequence_batcher (pybackend's addition): serve through Triton's sequence batcher
    instead of the dynamic batcher (``batcher`` must then stay at its defaults)."""

    batching: bool = True
    max_batch_size: int = 4
    batcher: DynamicBatcher = dataclasses.field(default_factory=DynamicBatcher)
    response_cache: bool = False
    decoupled: bool = False
    model_warmup: Optional[List[ModelWarmup]] = None
    sequence_batcher: Optional[SequenceBatcher] = None
