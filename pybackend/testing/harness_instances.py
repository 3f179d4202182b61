"""Several instances of one model in the offline harness, under the model's
PYBACKEND_INSTANCE_PROCESS (docs/instances.md, docs/testing.md).

In this process every instance is a :class:`ModelHarness` of its own (its own
``TritonPythonModel``, ``initialize(args)`` with its own instance name, its own statistics
of execute and its own response senders) and its own thread (:class:`InstanceThread`; one
instance's too, as a stub's main thread): ``auto_complete_config``, ``initialize``,
``execute`` and ``finalize`` of an instance run on it, so two instances' executes run
concurrently as in the server. What a process holds is emulated for
``pb_utils.shared``: under ``shared`` the instances share one table, under ``own`` and
``fork`` each has a table of its own (its process's). model.py is imported once here in
every mode: module-level state is shared as under ``shared`` and ``fork``, not separated as
under ``own`` (StubModel runs each instance in a process of its own for that).
"""

from __future__ import annotations

import functools
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ..utils.errors import TritonModelException
from ..utils.process_shared import Registry
from .harness_bounds import debugging, run_serving

T = TypeVar("T")

MODES = ("own", "shared", "fork")


def instance_process_of(config: Dict[str, Any], model_name: str) -> str:
    """The model's PYBACKEND_INSTANCE_PROCESS, refused as the backend refuses it
    (csrc/backend/instance_host.cc, model_state.cc: the same texts)."""
    params = config.get("parameters") or {}
    value = str((params.get("PYBACKEND_INSTANCE_PROCESS") or {}).get("string_value", ""))
    if value not in ("",) + MODES:
        raise TritonModelException(
            f"model '{model_name}': incorrect value for PYBACKEND_INSTANCE_PROCESS: '{value}' "
            '(expected "own" (one process per instance, the default), "shared" (one process, '
            'one thread per instance) or "fork" (model.py imported once, one forked process '
            "per instance); docs/instances.md)"
        )
    # The backend's values for "on", exactly (model_state.cc: case-sensitive, no "on").
    isolate = str((params.get("ISOLATE_GPU") or {}).get("string_value", ""))
    if value in ("shared", "fork") and isolate in ("yes", "true", "1"):
        raise TritonModelException(
            f"model '{model_name}': ISOLATE_GPU gives each instance a process that sees only "
            f"its own device, and PYBACKEND_INSTANCE_PROCESS={value} puts the instances in "
            "one process: choose one of the two"
        )
    return value or "own"


def start_together(instances: List[Any]) -> Optional[BaseException]:
    """Start each of ``instances`` on a thread of its own, all at once (as the server loads
    a model's instances); once all are done, the first error (the load's), or None."""
    errors: List[BaseException] = []

    def start(instance: Any) -> None:
        try:
            instance.start()
        except BaseException as e:  # noqa: BLE001 - returned, as the load's error
            errors.append(e)

    threads = [threading.Thread(target=start, args=(i,)) for i in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors[0] if errors else None


def instance_names(config: Dict[str, Any], count: int, model_name: str) -> List[str]:
    """The names of the model's first ``count`` instances, as the server names them (its
    instance groups in order, ``<group>_<i>``)."""
    names = [
        f"{group['name']}_{i}"
        for group in config.get("instance_group") or []
        for i in range(int(group.get("count", 1)))
    ]
    if count < 1 or count > len(names):
        raise ValueError(
            f"model '{model_name}': instances={count}, but its instance_group declares "
            f"{len(names)} instance(s); set count in config.pbtxt's instance_group (or the "
            "config= dict) to at least the number of instances to run"
        )
    return names[:count]


def instance_kind(config: Dict[str, Any], instance_name: str) -> str:
    """ "CPU", "GPU" or "MODEL": the kind of the group the instance belongs to, as the
    backend names it in ``args["model_instance_kind"]``."""
    for group in config.get("instance_group") or []:
        if instance_name.startswith(f"{group['name']}_"):
            kind = str(group.get("kind", ""))
            return {"KIND_GPU": "GPU", "KIND_MODEL": "MODEL"}.get(kind, "CPU")
    return "CPU"


class InstanceThread:
    """The thread an instance's model code runs on, all of it (model.py's import,
    ``auto_complete_config``, ``initialize``, each ``execute``, ``finalize``), as a stub
    runs it on its main thread: what that code leaves on its thread (a ``threading.local``,
    an sqlite3 connection, the ``decimal`` context, numpy's error state, torch's grad mode
    and current device) is there at its next call. A call from that thread itself runs inline
    instead of waiting for it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._calls: "queue.Queue[Optional[Tuple[Callable[[], Any], Future[Any]]]]" = queue.Queue()
        self._busy = False  # in a call now
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[[], T]) -> T:
        if threading.current_thread() is self._thread:
            return fn()
        done: "Future[T]" = Future()
        try:
            run_serving(functools.partial(self._calls.put, (fn, done)), done)
            return done.result()
        finally:
            # A raise's traceback holds this frame, the frame the future, the future the
            # exception: without this cycle, what the model dropped ends by its count (a
            # dropped response sender is seen at once, as in the stub).
            del done

    def held_elsewhere(self) -> bool:
        """Whether it is in a call another thread made: one whose caller's timeout gave it up
        (the harness makes one call of an instance at a time)."""
        return self._busy and threading.current_thread() is not self._thread

    def stop(self) -> None:
        """It ends after its call (if any); waited for only when it is in none (a call its
        caller gave up on may never return)."""
        self._calls.put(None)
        if not self._busy and threading.current_thread() is not self._thread:
            self._thread.join(10)

    def _serve(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            fn, done = item
            self._busy = True
            try:
                done.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - the caller gets what the model raised
                done.set_exception(e)
            finally:
                self._busy = False
                # Not kept while it waits for the next call: the call's closure holds its
                # requests, which a model may leave for the garbage collector to end.
                del item, fn, done


class InstanceSet:
    """The instances of a model beyond its first, as both the offline harness
    (:class:`Instances`) and the stub processes (stub_instances.py) hold them: started all at
    once after the first, closed before it. A subclass makes an other (``_make_other``) and
    closes one (``_close_other``)."""

    def __init__(self, first: Any, count: int, mode: Optional[str]) -> None:
        self.first = first
        self.count = count
        self.requested_mode = mode
        self.mode = mode or "own"
        self.others: List[Any] = []
        self.is_other = False  # one of another model's others: that one prepared it

    def _make_other(self, name: str) -> Any:
        raise NotImplementedError

    def _close_other(self, other: Any) -> None:
        other.close()

    def start_others(self) -> None:
        """The other instances, each started on its own thread, all at once (a failing
        ``initialize`` fails the start: the others that started are closed)."""
        first = self.first
        names = instance_names(first.config, self.count, first.model_name)
        for name in [n for n in names if n != first.instance_name][: self.count - 1]:
            other = self._make_other(name)
            other.statistics = first.statistics  # the server's statistics are the model's
            other._instances.mode = self.mode
            other._instances.is_other = True
            self.others.append(other)
        error = start_together(self.others)
        if error is not None:
            self.close_others()
            raise error

    def close_others(self) -> None:
        others, self.others = self.others, []
        for other in others:
            self._close_other(other)

    @property
    def all(self) -> List[Any]:
        return [self.first, *self.others]


class Instances(InstanceSet):
    """The instances of a :class:`ModelHarness` (its first instance) beyond the first, each
    with its own thread and, unless under ``shared``, its own process's table."""

    def prepare(self) -> None:
        """Before the first instance loads: the mode, and its process's table and thread."""
        if self.is_other:
            return
        first = self.first
        mode = instance_process_of(first.config, first.model_name)
        if self.requested_mode is not None:
            mode = instance_process_of(
                {
                    "parameters": {
                        "PYBACKEND_INSTANCE_PROCESS": {"string_value": self.requested_mode}
                    }
                },
                first.model_name,
            )
        self.mode = mode
        instance_names(first.config, self.count, first.model_name)  # refuses a bad count early
        first._code.registry = Registry()
        # Its code on a thread of its own, as a stub's on its main thread; in a debug mode
        # one instance's code runs on the caller's thread (the breakpoint's), no less its own.
        if self.count > 1 or not debugging(config=first.config):
            first._code.thread = InstanceThread(first.instance_name)

    def _make_other(self, name: str) -> Any:
        first = self.first
        other = type(first)(
            first.model_dir,
            version=first.version,
            config=first.config,
            model_name=first.model_name,
            instance_name=name,
            model_file=first.model_file.name,
            auto_complete=False,
            initialize_timeout=first.initialize_timeout,
            runtime=first.runtime_dir,
        )
        other._code.registry = first._code.registry if self.mode == "shared" else Registry()
        other._code.thread = InstanceThread(name)
        return other

    def _close_other(self, other: Any) -> None:
        if other.model is not None:
            other.close()
        other._code.stop_thread()
