"""A :class:`~pybackend.testing.stub_model.StubModel`'s waits for the RESULT of an EXECUTE,
bounded by the call's timeout as the in-process engine bounds its calls (harness_bounds.py:
the same worker thread and wait). Past the timeout the requests are cancelled and the RESULT
is left to the thread awaiting it, named in an :class:`ExecuteStillRunningWarning`; the stub
runs on (it is not killed: ``execute_timeout`` does that), and the StubModel refuses new
requests until that RESULT comes, instead of queueing them behind it."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Optional, Sequence, TypeVar

from ..utils.errors import TritonModelException
from .harness_bounds import (
    ExecuteStillRunningWarning,
    Worker,
    debugging,
    run_bounded,
    still_running_text,
    stub_still_running_warning,
    time_left,
)
from .harness_errors import InferError

T = TypeVar("T")


class ResultWaits:
    """The RESULT waits of the StubModel ``model``; ``cancel(token)`` is its client's
    cancel of a request."""

    def __init__(self, model: Any, cancel: Callable[[int], None]) -> None:
        self._model = model
        self._cancel = cancel
        #: The thread in an EXECUTE awaiting its RESULT (set by the StubModel under its lock).
        self.runner: Optional[threading.Thread] = None
        self._abandoned: Optional[threading.Thread] = None  # left awaiting it by a timeout

    def bounded(
        self,
        fn: Callable[[], T],
        timeout: float,
        deadline: Optional[float],
        tokens: Sequence[int],
        timed_out: Callable[[], InferError],
    ) -> T:
        """``fn()`` (an EXECUTE and its RESULT) waited for until ``deadline`` (None: as long
        as it runs, for a BLS stream, which its caller's execute bounds): past it the
        requests ``tokens`` are cancelled, a RESULT still awaited is left to its thread
        (with a warning) and ``timed_out()`` is raised. In a debug mode nothing is bounded,
        as in the backend's."""
        model = self._model
        if deadline is None or debugging(getattr(model, "_debug", ""), model.config):
            return fn()

        def give_up(worker: Worker[T]) -> Exception:
            for token in tokens:
                self._cancel(token)
            if self.runner is worker.thread:
                self._abandoned = worker.thread
                text = stub_still_running_warning(
                    model.model_name, model.instance_name, timeout, worker.thread.name
                )
                warnings.warn(text, ExecuteStillRunningWarning, stacklevel=5)
            return timed_out()

        name = f"harness-execute-{model.model_name}-{tokens[0] if tokens else 0}"
        return run_bounded(fn, time_left(timeout, deadline), name, give_up)

    def refuse_behind_abandoned(self) -> None:
        """Raises while an abandoned RESULT is awaited: a request would wait behind it for
        as long as the execute runs (as in-process, harness_execute.py)."""
        stuck = self._abandoned
        if stuck is None:
            return
        if stuck.is_alive():
            model = self._model
            raise TritonModelException(
                still_running_text(model.model_name, model.instance_name, stuck.name, "StubModel")
            )
        self._abandoned = None

    def abandoned_returns(self, timeout: float) -> bool:
        """Waits at most ``timeout`` seconds for an abandoned RESULT (closing): whether none
        is awaited any more."""
        stuck = self._abandoned
        if stuck is not None:
            stuck.join(timeout)
            return not stuck.is_alive()
        return True
