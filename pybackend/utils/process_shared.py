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
from contextlib import contextmanager
from typing import Any, Callable, Dict, Hashable, Iterator, Optional, Tuple, TypeVar

T = TypeVar("T")


class _Build:
    """One build in progress: those who wait for it, and how it ended."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: Optional[BaseException] = None
        self.builder = threading.get_ident()


class Registry:
    """One table of shared objects: the process's, or, in the offline harness, that of one
    process it stands for (pybackend.testing: under PYBACKEND_INSTANCE_PROCESS own or fork
    each instance has a process, so a table, of its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: Dict[Hashable, Any] = {}
        self._building: Dict[Hashable, _Build] = {}
        # thread -> (key, build) it waits for: a wait that would close a cycle is refused.
        self._waiting: Dict[int, Tuple[Hashable, _Build]] = {}

    def get(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The object for ``key``, built by ``factory()`` on the first call."""
        me = threading.get_ident()
        with self._lock:
            if key in self._built:
                return self._built[key]  # type: ignore[no-any-return]
            build = self._building.get(key)
            mine = build is None
            if build is None:
                build = self._building[key] = _Build()
            else:
                self._refuse_cycle(key, build, me)
                self._waiting[me] = (key, build)
        if not mine:
            try:
                build.done.wait()  # bounded by the factory: the builder always finishes it
            finally:
                with self._lock:
                    del self._waiting[me]
            if build.error is not None:
                raise build.error
            return build.value  # type: ignore[no-any-return]
        try:
            value = factory()
        except BaseException as e:
            build.error = e
            with self._lock:
                del self._building[key]
            build.done.set()
            raise
        build.value = value
        with self._lock:
            self._built[key] = value
            del self._building[key]
        build.done.set()
        return value

    def _refuse_cycle(self, key: Hashable, build: _Build, me: int) -> None:
        """Raises if waiting for ``build`` would never end: its builder is this thread, or
        waits (through other builds) for one this thread is building. Under ``_lock``."""
        chain = [key]
        owner = build.builder
        while owner != me:
            waits = self._waiting.get(owner)
            if waits is None:
                return
            chain.append(waits[0])
            owner = waits[1].builder
        if len(chain) == 1:
            raise RuntimeError(
                f"pb_utils.shared({key!r}, ...): the factory of {key!r} asked for "
                f"{key!r} itself, which it is still building; build it without that call"
            )
        cycle = " -> ".join(repr(k) for k in chain)
        raise RuntimeError(
            f"pb_utils.shared({key!r}, ...): the factories wait for each other ({cycle}, "
            f"which this thread's factory is building): each builds in another thread "
            "(another instance's initialize), so neither would finish; build one of them "
            "without asking for the other"
        )

    def clear(self) -> None:
        with self._lock:
            self._built.clear()


_process = Registry()
# The offline harness binds the threads that run one of its instances to the table of the
# process that instance stands for; a thread bound to none uses the process's.
_local = threading.local()


def shared(key: Hashable, factory: Callable[[], T]) -> T:
    """The process's object for ``key``, built by ``factory()`` on the first call."""
    registry: Optional[Registry] = getattr(_local, "registry", None)
    return (registry or _process).get(key, factory)


@contextmanager
def bound(registry: Optional[Registry]) -> Iterator[None]:
    """The calling thread's ``shared`` uses ``registry`` (None: the process's) for the block."""
    previous = getattr(_local, "registry", None)
    _local.registry = registry
    try:
        yield
    finally:
        _local.registry = previous


def _forget_all() -> None:
    """Tests: start from an empty table."""
    _process.clear()
