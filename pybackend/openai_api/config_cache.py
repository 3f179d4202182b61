"""Models' configurations as the endpoint last read them from tritonserver.

A read is a gRPC call that tritonserver answers in about 1-1.5 ms here: a quarter of a tiny
completion's time through the endpoint. So a configuration is kept for ``ttl`` seconds, and a
request that fails on a kept one asks whether the model changed meanwhile (a reload with a
new config.pbtxt): :meth:`ConfigCache.changed` reads it afresh, and the caller runs the
request once more with the new one. What a kept configuration can still hide, for at most
``ttl`` after a reload, is a change that fails nothing: an optional input added, say, which
the endpoint then fills from the next read on (docs/openai.md)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Tuple

#: Seconds a model's configuration is used without reading it again.
CONFIG_TTL = 5.0

Config = Dict[str, Any]


@dataclass(frozen=True)
class Read:
    """A model's configuration; ``kept``: whether it came from the cache, not tritonserver."""

    config: Config
    kept: bool


class ConfigCache:
    """Configurations by model name; ``ttl`` 0 reads every time. Thread-safe: two requests
    that miss at once both read, and the later read stands."""

    def __init__(self, ttl: float = CONFIG_TTL, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: Dict[str, Tuple[float, Config]] = {}

    def get(self, model: str, read: Callable[[], Config]) -> Read:
        """The kept configuration while it is younger than ``ttl``; else ``read()``, kept
        (a read that raises keeps nothing: a model not there is asked for again)."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(model)
            if entry is not None and now - entry[0] < self.ttl:
                return Read(entry[1], kept=True)
        return Read(self._store(model, now, read()), kept=False)

    def changed(self, model: str, used: Mapping[str, Any], read: Callable[[], Config]) -> bool:
        """Whether the model's configuration now differs from ``used`` (read afresh and kept;
        what ``read`` raises, a model since unloaded say, reaches the caller)."""
        self.forget(model)
        return self._store(model, self._clock(), read()) != used

    def forget(self, model: str) -> None:
        with self._lock:
            self._entries.pop(model, None)

    def _store(self, model: str, asked_at: float, config: Config) -> Config:
        """Keeps ``config``, read from ``asked_at`` on, unless a read asked for later is kept
        already: a slow read begun before a reload must not put the old one back."""
        if self.ttl > 0:
            with self._lock:
                entry = self._entries.get(model)
                if entry is None or entry[0] <= asked_at:
                    self._entries[model] = (asked_at, config)
        return config
