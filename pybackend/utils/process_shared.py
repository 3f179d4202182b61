"""``pb_utils.shared(key, factory)``: one object per key for the whole process
(docs/instances.md).

Under PYBACKEND_INSTANCE_PROCESS=shared every instance of a model runs in one process, so
``self.weights = pb_utils.shared("weights", load)`` in ``initialize`` loads the weights once
for all of them; under ``own`` and ``fork`` each instance has a process of its own and gets
its own copy, as before. The first caller of a key builds the object; callers of the same
key meanwhile wait for that build. A factory that raises is not remembered: the exception
goes to the caller that ran it and to those that waited, and the next call tries again.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Hashable, Optional, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_built: Dict[Hashable, Any] = {}
_building: Dict[Hashable, "_Build"] = {}


class _Build:
    """One build in progress: those who wait for it, and how it ended."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: Optional[BaseException] = None


def shared(key: Hashable, factory: Callable[[], T]) -> T:
    """The process's object for ``key``, built by ``factory()`` on the first call."""
    with _lock:
        if key in _built:
            return _built[key]  # type: ignore[no-any-return]
        build = _building.get(key)
        mine = build is None
        if build is None:
            build = _building[key] = _Build()
    if not mine:
        build.done.wait()  # bounded by the factory: the builder always finishes it
        if build.error is not None:
            raise build.error
        return build.value  # type: ignore[no-any-return]
    try:
        value = factory()
    except BaseException as e:
        build.error = e
        with _lock:
            del _building[key]
        build.done.set()
        raise
    build.value = value
    with _lock:
        _built[key] = value
        del _building[key]
    build.done.set()
    return value


def _forget_all() -> None:
    """Tests: start from an empty table."""
    with _lock:
        _built.clear()
