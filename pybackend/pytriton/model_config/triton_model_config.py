"""``TritonModelConfig`` and its parts (``pytriton.model_config.triton_model_config``): a
model's configuration as the decorators, ``triton_context`` and the clients'
``model_config`` hand it to user code, PyTriton's fields and defaults. Read from a server's
JSON by parser.py (``ModelConfigParser.from_dict``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence

from .common import DeviceKind, DynamicBatcher, ModelWarmup

__all__ = [
    "DeviceKind",
    "DynamicBatcher",
    "ModelWarmup",
    "ResponseCache",
    "TensorSpec",
    "TritonModelConfig",
]


@dataclasses.dataclass
class ResponseCache:
    """model_config.proto's ``response_cache``."""

    enable: bool


@dataclasses.dataclass
class TensorSpec:
    """One input or output as the server describes it: name, shape (without the batch
    dimension), numpy dtype (``np.bytes_`` for strings), optional."""

    name: str
    shape: tuple
    dtype: Any
    optional: Optional[bool] = False


@dataclasses.dataclass
class TritonModelConfig:
    """A model's configuration. ``inputs``/``outputs`` are TensorSpec when read from a
    server and the bound ``Tensor`` objects inside ``Triton.bind`` (same attributes:
    name, shape, dtype, optional). ``response_cache`` is ``ResponseCache(enable=True)``
    when the cache is on, else None (PyTriton's)."""

    model_name: str
    model_version: int = 1
    max_batch_size: int = 4
    batching: bool = True
    batcher: Optional[DynamicBatcher] = None
    instance_group: Dict[DeviceKind, Optional[int]] = dataclasses.field(default_factory=dict)
    decoupled: bool = False
    backend_parameters: Dict[str, str] = dataclasses.field(default_factory=dict)
    inputs: Optional[Sequence[Any]] = None
    outputs: Optional[Sequence[Any]] = None
    response_cache: Optional[ResponseCache] = None
    model_warmup: Optional[List[ModelWarmup]] = None

    @property
    def backend(self) -> str:
        """The backend a PyTriton model's configuration names (always "python")."""
        return "python"
