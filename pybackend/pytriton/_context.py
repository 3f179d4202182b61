"""Which model a decorated inference callable serves: the decorators need its outputs'
names, batching and batcher (PyTriton's ``get_model_config``). The instance thread that
calls a callable names its model here for the duration of the call; ``Triton.bind`` also
records it on the callable, as PyTriton does, for code that asks outside a call."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import threading
from collections.abc import MutableMapping
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np

from .exceptions import PyTritonValidationError
from .model_config import DynamicBatcher, Tensor


@dataclasses.dataclass
class TritonModelConfig:
    """The parts of a bound model's configuration callables and decorators may read."""

    model_name: str
    model_version: int = 1
    max_batch_size: int = 4
    batching: bool = True
    batcher: Optional[DynamicBatcher] = None
    inputs: List[Tensor] = dataclasses.field(default_factory=list)
    outputs: List[Tensor] = dataclasses.field(default_factory=list)
    decoupled: bool = False
    response_cache: bool = False


class ModelConfigDict(MutableMapping):  # type: ignore[type-arg]
    """Model configs by inference callable (a bound ``__call__`` counts as its object)."""

    def __init__(self) -> None:
        self._data: Dict[str, TritonModelConfig] = {}
        self._keys: List[Callable[..., Any]] = []

    @staticmethod
    def _key(fn: Any) -> str:
        if inspect.ismethod(fn) and fn.__name__ == "__call__":
            fn = fn.__self__
        return str(fn)

    def __getitem__(self, fn: Any) -> TritonModelConfig:
        return self._data[self._key(fn)]

    def __setitem__(self, fn: Any, config: TritonModelConfig) -> None:
        self._keys.append(fn)
        self._data[self._key(fn)] = config

    def __delitem__(self, fn: Any) -> None:
        del self._data[self._key(fn)]

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._keys)


@dataclasses.dataclass
class TritonContext:
    model_configs: ModelConfigDict = dataclasses.field(default_factory=ModelConfigDict)


_local = threading.local()


@contextlib.contextmanager
def serving(config: TritonModelConfig, context: TritonContext) -> Iterator[None]:
    """While a callable runs on this thread, it serves ``config``."""
    previous = getattr(_local, "current", None)
    _local.current = (config, context)
    try:
        yield
    finally:
        _local.current = previous


def inject(context: TritonContext, fn: Any, config: TritonModelConfig) -> None:
    """Record ``config`` for ``fn`` (PyTriton sets ``__triton_context__`` on it)."""
    context.model_configs[fn] = config
    target: Any = fn.__self__ if inspect.ismethod(fn) else fn
    try:
        target.__triton_context__ = context
    except (AttributeError, TypeError):
        pass  # a builtin or slotted object: the per-call record still serves


def get_triton_context(wrapped: Any, instance: Any) -> TritonContext:
    current = getattr(_local, "current", None)
    if current is not None:
        return current[1]
    caller = instance or wrapped
    context = getattr(caller, "__triton_context__", None)
    if context is None:
        raise PyTritonValidationError(
            "Wrapped function or object must bound with triton to get  __triton_context__"
        )
    return context


def get_model_config(wrapped: Any, instance: Any) -> TritonModelConfig:
    current = getattr(_local, "current", None)
    if current is not None:
        return current[0]
    return get_triton_context(wrapped, instance).model_configs[wrapped]


_TRITON_TO_NUMPY = {
    "TYPE_BOOL": np.bool_, "TYPE_UINT8": np.uint8, "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32, "TYPE_UINT64": np.uint64, "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16, "TYPE_INT32": np.int32, "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16, "TYPE_FP32": np.float32, "TYPE_FP64": np.float64,
    "TYPE_STRING": np.bytes_,
}  # fmt: skip


def config_from_json(config: Dict[str, Any]) -> TritonModelConfig:
    """The server's model configuration (JSON) as PyTriton's TritonModelConfig."""

    def tensors(items: List[Dict[str, Any]]) -> List[Tensor]:
        return [
            Tensor(
                shape=tuple(int(d) for d in t.get("dims", [])),
                dtype=_TRITON_TO_NUMPY.get(t.get("data_type", t.get("dataType", "")), np.bytes_),
                name=t["name"],
                optional=bool(t.get("optional", False)),
            )
            for t in items
        ]

    mbs = int(config.get("max_batch_size", config.get("maxBatchSize", 0)) or 0)
    policy = config.get("model_transaction_policy", config.get("modelTransactionPolicy", {}))
    return TritonModelConfig(
        model_name=config.get("name", ""),
        max_batch_size=mbs,
        batching=mbs > 0,
        inputs=tensors(config.get("input", [])),
        outputs=tensors(config.get("output", [])),
        decoupled=bool(policy.get("decoupled", False)),
    )
