"""The batches a :class:`~pybackend.testing.stub_model.StubModel` sends its stub process:
which requests of an ``infer_batch`` go into its EXECUTE, and each EXECUTE, one at a time
as the backend sends them, the stub killed past the model's ``execute_timeout``, timed into
the model's statistics."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..ipc.channel import ChannelClosed
from ..utils.errors import ErrorCode
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as RELEASE_RESCHEDULE
from .abandoned_execute import AbandonedExecute
from .call_cycles import STUB_MODEL_CYCLES as CYCLES
from .call_cycles import Call
from .harness_errors import InferError
from .inputs import as_input_array, parameters_json
from .model_dir import ModelOnDisk
from .outputs import requested_outputs as requested_outputs_of
from .statistics import ExecuteTimes
from .stub_driver import StubDriver
from .stub_process import Watchdog, timed_out_text
from .stub_sends import Died

#: The per-request options of infer_batch a stub process honours.
BATCH_OPTIONS = {"requested_outputs", "request_id", "parameters", "queued_ns"}

#: A request of an infer_batch in its EXECUTE: its index in the batch, its input arrays,
#: requested outputs, request fields (token, id, parameters) and when it arrived.
Admitted = Tuple[int, Dict[str, np.ndarray], List[str], Dict[str, Any], int]


def admit_batch(
    disk: ModelOnDisk,
    batch: Sequence[Mapping[str, Any]],
    options: Optional[Sequence[Mapping[str, Any]]],
    requested_outputs: Sequence[str],
    tokens: Iterator[int],
    check: Callable[[Mapping[str, np.ndarray], str], None],
    results: List[Any],
) -> List[Admitted]:
    """The requests of ``batch`` that go into its EXECUTE; one that the server's checks
    (``check``, and ``disk``'s configuration) refuse has its InferError in ``results``."""
    admitted: List[Admitted] = []
    for i, inputs in enumerate(batch):
        opts = dict(options[i]) if options is not None else {}
        unknown = sorted(set(opts) - BATCH_OPTIONS)
        if unknown:  # as ModelHarness refuses them (its request's arguments)
            raise TypeError(
                f"infer_batch options {unknown} are not supported in a stub process "
                f"(it takes {sorted(BATCH_OPTIONS)})"
            )
        request_id = str(opts.get("request_id", ""))
        arrays = {k: as_input_array(v) for k, v in inputs.items()}
        try:
            wanted = opts.get("requested_outputs", requested_outputs)
            requested = requested_outputs_of(disk.config, wanted, disk.model_name)
            check(arrays, request_id)
            params = parameters_json(opts.get("parameters"))
        except InferError as e:
            results[i] = e
            continue
        kwargs: Dict[str, Any] = {
            "token": next(tokens),
            "request_id": request_id,
            "parameters": params,
        }
        queued = opts.get("queued_ns")
        admitted.append((i, arrays, requested, kwargs, queued or time.monotonic_ns()))
    return admitted


class StubBatches:
    """The EXECUTEs of the model ``disk`` (its names, configuration and statistics, read at
    each call): ``abandoned`` is the execute a caller's timeout left running, ``died`` why
    the stub stopped answering."""

    def __init__(self, disk: ModelOnDisk, abandoned: AbandonedExecute, died: Died) -> None:
        self._disk = disk
        self._abandoned = abandoned
        self._died = died
        self._lock = threading.Lock()  # one execute at a time, as the backend sends them
        self._ids = itertools.count(1)

    def run(
        self,
        driver: StubDriver,
        batch: List[Dict[str, np.ndarray]],
        requested: Sequence[Sequence[str]],
        kwargs: List[Dict[str, Any]],
        queued: Sequence[int],
        execute_timeout: Optional[float],
        served: Sequence[Optional[Call]] = (),
    ) -> List[Any]:
        """One EXECUTE of ``batch`` (``requested``: each request's outputs; ``queued``: when
        each arrived, for the statistics): each request's item (a response, or ``none``
        where its sender answers), or the InferError every request gets when the batch
        failed or the stub died or timed out in it (past ``execute_timeout`` seconds, when
        not None); ``served``: the BLS calls among the requests (call_cycles.py)."""
        self._abandoned.refuse_behind()
        disk = self._disk
        with self._lock:
            times = ExecuteTimes()
            try:
                with (
                    self._abandoned.running(),
                    CYCLES.executing(disk.model_name, disk.instance_name, served),
                ):
                    result = self._watched(
                        driver,
                        execute_timeout,
                        lambda: driver.execute(
                            batch,
                            batch_id=next(self._ids),
                            requested=[list(r) for r in requested],
                            request_kwargs=[dict(k) for k in kwargs],
                            times=times,
                        ),
                    )
            except InferError:
                self._record(batch, queued, [None] * len(batch), times.finish())
                raise
            if "error" in result:
                code, message = result["error"]
                items: List[Any] = [InferError(message, code) for _ in batch]
            else:
                items = list(result["items"])
            self._record(batch, queued, items, times.finish())
        return items

    def _watched(
        self,
        driver: StubDriver,
        execute_timeout: Optional[float],
        execute: Callable[[], Dict[str, Any]],
    ) -> Dict[str, Any]:
        """``execute()``, the stub killed past ``execute_timeout`` seconds (when not None);
        an InferError when the stub died or was killed in it."""
        watchdog = None if execute_timeout is None else Watchdog(execute_timeout, driver)
        try:
            return execute()
        except (ChannelClosed, OSError, AssertionError) as e:
            if watchdog is not None and watchdog.fired:
                disk = self._disk
                text = timed_out_text(disk.model_name, disk.instance_name, execute_timeout or 0)
                raise InferError(text, ErrorCode.INTERNAL) from None
            raise InferError(self._died(e), ErrorCode.INTERNAL) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()

    def _record(
        self,
        batch: List[Dict[str, np.ndarray]],
        queued: Sequence[int],
        items: Sequence[Any],
        times: ExecuteTimes,
    ) -> None:
        """The execute in the statistics (an item that is an error of the stub's own, or
        none where the batch failed, fails its request; the model's own error response is
        its answer; one released to come back is left out)."""
        outcomes = [
            (
                when,
                self._disk.batch_size(a.shape for a in arrays.values()),
                isinstance(item, dict) and not item.get("fails"),
            )
            for arrays, when, item in zip(batch, queued, items)
            if not (isinstance(item, dict) and item.get("release_flags") == RELEASE_RESCHEDULE)
        ]
        self._disk.statistics.record(times, outcomes)
