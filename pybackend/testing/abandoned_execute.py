"""The ``execute`` a caller's timeout abandoned, one rule for both offline engines: the
in-process :class:`~pybackend.testing.harness_execute.Executor` (the model runs on in the
instance's thread, which the call's worker left behind waits for) and a StubModel's
requests (stub_requests.py: the model runs on in the stub process, which is not killed,
``execute_timeout`` does that; the thread left behind awaits its RESULT). Python cannot
stop a thread and an EXECUTE sent cannot be taken back, so past a call's timeout
(harness_bounds.run_bounded) its requests are cancelled, the execute still running is named
in an :class:`ExecuteStillRunningWarning`, and until it returns the engine refuses new
requests instead of queueing them behind it for as long as it runs (docs/testing.md,
"Timeouts")."""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, Literal, Optional, Sequence, TypeVar

from ..utils.errors import TritonModelException
from .harness_bounds import (
    ExecuteStillRunningWarning,
    Worker,
    current_worker,
    debugging,
    run_bounded,
    still_running_text,
    still_running_warning,
    stub_still_running_warning,
    time_left,
)
from .harness_errors import InferError
from .model_dir import ModelOnDisk

T = TypeVar("T")

#: The engine a refusal names (and whose remedy its warning gives): where the execute runs
#: on differs, in-process on the instance's thread, for a StubModel in its stub process.
Engine = Literal["ModelHarness", "StubModel"]

_WARNINGS: Dict[Engine, Callable[[str, str, float, str], str]] = {
    "ModelHarness": still_running_warning,
    "StubModel": stub_still_running_warning,
}


class AbandonedExecute:
    """The execute of the model ``disk`` (its names and configuration, read at each call:
    the configuration is completed at start) that a caller's timeout left running in the
    ``engine``, if any; ``cancel(token)`` is the client's cancel of a request, and ``debug``
    a StubModel's ``debug=`` (then, as with PYBACKEND_DEBUG, nothing is bounded)."""

    def __init__(
        self,
        disk: ModelOnDisk,
        engine: Engine,
        cancel: Callable[[int], None],
        debug: str = "",
        runs_on: Callable[[str], str] = lambda caller: caller,
    ) -> None:
        self._disk = disk
        self._engine = engine
        self._cancel = cancel
        self._debug = debug
        # The name of the thread the model's execute runs on, given the call's own (the
        # in-process instance's thread, which the call's worker waits for).
        self._runs_on = runs_on
        # Who is in execute, if anyone: the call's Worker (a kept thread runs many calls),
        # or the thread for a call made without one (a BLS call, a debug mode).
        self._runner: Optional[object] = None
        self._stuck: Optional[object] = None  # the runner a timeout left in execute
        self._thread_name = ""  # where that execute runs on
        self._left = threading.Condition()  # notified when a runner leaves execute

    @contextmanager
    def running(self) -> Iterator[None]:
        """The current thread is in execute for the block (the engine holds its one execute
        at a time). Nested, a model's BLS call to itself in-process, the outer execute
        stays the one a timeout abandons."""
        outer = self._runner is None
        if outer:
            self._runner = current_worker() or threading.current_thread()
        try:
            yield
        finally:
            if outer:
                with self._left:
                    self._runner = None
                    self._left.notify_all()

    def bounded(
        self,
        fn: Callable[[], T],
        timeout: float,
        deadline: Optional[float],
        tokens: Sequence[int],
        timed_out: Callable[[], InferError],
    ) -> T:
        """``fn()`` (a call that runs execute) on a worker thread waited for until
        ``deadline`` (the call's ``timeout`` counted from its start; None: as long as it
        runs, a StubModel's BLS stream, which its caller's execute bounds). Past it the
        requests ``tokens`` are cancelled (first: a cooperative model stops sooner), an
        execute still running on the worker is abandoned, and ``timed_out()`` is raised."""
        disk = self._disk
        if deadline is None or debugging(self._debug, disk.config):
            return fn()  # a breakpoint may stop it for as long as the developer takes

        def give_up(worker: Worker[T]) -> Exception:
            for token in tokens:
                self._cancel(token)
            # A worker still waiting for the engine's lock never ran execute: nothing holds
            # the engine, so nothing is abandoned (its requests stay cancelled).
            if self._runner is worker:
                self._stuck = worker
                self._thread_name = self._runs_on(worker.thread.name)
                text = _WARNINGS[self._engine](
                    disk.model_name, disk.instance_name, timeout, self._thread_name
                )
                # Attributed to run_bounded, the one bounded wait, in both engines alike
                # (how deep the caller's frame lies differs between calls and engines).
                warnings.warn(text, ExecuteStillRunningWarning, stacklevel=2)
            return timed_out()

        name = f"harness-execute-{disk.model_name}-{tokens[0] if tokens else 0}"
        return run_bounded(fn, time_left(timeout, deadline), name, give_up)

    def refuse_behind(self) -> None:
        """Raises while the abandoned execute runs: a request would wait behind it for as
        long as it runs. Its own thread's calls (nested BLS calls, in-process) still run."""
        stuck = self._stuck
        if stuck is None or stuck is current_worker():
            return
        if self._in_execute(stuck):
            disk = self._disk
            text = still_running_text(
                disk.model_name, disk.instance_name, self._thread_name, self._engine
            )
            raise TritonModelException(text)
        self._stuck = None  # it returned: the engine serves again

    def still_running(self) -> Optional[str]:
        """The name of the thread a caller's timeout left in execute, while it is there."""
        stuck = self._stuck
        return self._thread_name if stuck is not None and self._in_execute(stuck) else None

    def returned(self, timeout: float) -> bool:
        """Waits at most ``timeout`` seconds for the abandoned execute (closing): whether
        none runs any more."""
        stuck = self._stuck
        if stuck is None:
            return True
        with self._left:
            return self._left.wait_for(lambda: not self._in_execute(stuck), timeout)

    def _in_execute(self, runner: object) -> bool:
        # In-process the worker may outlive execute (a stream's wait for its sender's
        # FINAL): only execute itself holds the engine.
        return self._runner is runner
