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
from typing import Any, Callable, Dict, Iterator, List

from .exceptions import PyTritonValidationError
from .model_config.parser import ModelConfigParser
from .model_config.triton_model_config import TritonModelConfig


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


def config_from_json(config: Dict[str, Any]) -> TritonModelConfig:
    """The server's model configuration (JSON) as PyTriton's TritonModelConfig."""
    return ModelConfigParser.from_dict(config)
