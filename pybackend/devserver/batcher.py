"""The dynamic batcher of a model with ``dynamic_batching`` and a ``max_batch_size``:
requests that arrive together meet in one ``execute``, as under tritonserver, so that
``pb_utils.batch_requests`` and other batch-aware code see real batches in development.

Requests are gathered in arrival order until their rows (each request's batch dimension)
reach the largest preferred batch size (``max_batch_size`` when none is named), would pass
``max_batch_size``, or ``max_queue_delay_microseconds`` has passed since the first;
priorities and queue policies are not modelled."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..utils.errors import ErrorCode
from .call import InferCall
from .errors import ServeError

Item = Tuple[InferCall, "Future[Dict[str, np.ndarray]]"]


def batching_of(config: Mapping[str, Any]) -> Optional[Tuple[int, float, int]]:
    """(max_batch_size, queue delay in seconds, the batch size that goes at once) when the
    model has a dynamic batcher: a batch that reaches the largest of its preferred batch
    sizes (``max_batch_size`` when it names none) does not wait out the delay."""
    max_batch = int(config.get("max_batch_size", 0) or 0)
    batching = config.get("dynamic_batching")
    if batching is None or max_batch <= 0:
        return None
    delay_us = int(batching.get("max_queue_delay_microseconds", 0) or 0)
    preferred = [int(p) for p in batching.get("preferred_batch_size", []) or []]
    target = min(max(preferred, default=max_batch), max_batch)
    return max_batch, delay_us / 1e6, target


def rows(call: InferCall) -> int:
    """A request's batch size: the first dimension of its inputs."""
    for array in call.inputs.values():
        return int(array.shape[0]) if array.ndim else 1
    return 1


class Batcher:
    """Runs ``run_batch(calls) -> [outputs or ServeError]`` on the batches it gathers, up
    to ``workers`` batches at a time (one per instance of the model); :meth:`submit` waits
    for one request's answer. A batch is gathered only once a worker is free, so requests
    that arrive while every instance is busy meet in the next batch, as in tritonserver."""

    def __init__(
        self,
        name: str,
        max_batch: int,
        delay_s: float,
        run_batch: Callable[[List[InferCall]], List[Any]],
        workers: int = 1,
        target: Optional[int] = None,
    ) -> None:
        self.max_batch = max_batch
        self.delay_s = delay_s
        # A batch of this many rows goes at once (the largest preferred batch size).
        self.target = min(target or max_batch, max_batch)
        self._run_batch = run_batch
        self._name = name
        self._workers = max(1, workers)
        self._free = threading.Semaphore(self._workers)
        self._queue: "queue.Queue[Optional[Item]]" = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"batcher-{name}", daemon=True)
        self._thread.start()

    def submit(self, call: InferCall) -> Dict[str, np.ndarray]:
        future: "Future[Dict[str, np.ndarray]]" = Future()
        with self._lock:  # nothing is queued behind the end mark close() puts
            if self._closed:
                raise ServeError(
                    "the model was unloaded or reloaded while the request came in: send it again",
                    ErrorCode.UNAVAILABLE,
                )
            self._queue.put((call, future))
        return future.result()

    def close(self) -> None:
        """Answers what is queued, then stops (once the batches running are answered)."""
        with self._lock:
            self._closed = True
            self._queue.put(None)
        self._thread.join()
        for _ in range(self._workers):
            self._free.acquire()

    def _loop(self) -> None:
        carry: Optional[Item] = None
        while True:
            self._free.acquire()  # a worker (instance) is free: gather its batch
            first = carry if carry is not None else self._queue.get()
            carry = None
            if first is None:
                self._free.release()
                return
            batch, size = [first], rows(first[0])
            deadline = time.monotonic() + self.delay_s
            while size < self.target:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:  # closed: this batch is the last
                    self._start(batch)
                    return
                if size + rows(item[0]) > self.max_batch:
                    carry = item  # the next batch starts with it
                    break
                batch.append(item)
                size += rows(item[0])
            self._start(batch)

    def _start(self, batch: List[Item]) -> None:
        """The batch on a thread of its own, which frees its worker when answered."""
        if self._workers == 1:  # no other batch can run meanwhile: no thread needed
            return self._run(batch)
        name = f"batch-{self._name}"
        threading.Thread(target=self._run, args=(batch,), name=name, daemon=True).start()

    def _run(self, batch: List[Item]) -> None:
        try:
            self._answer(batch)
        finally:
            self._free.release()

    def _answer(self, batch: List[Item]) -> None:
        try:
            answers = self._run_batch([call for call, _ in batch])
        except Exception as e:  # noqa: BLE001 - every waiting client gets the failure
            answers = [ServeError(f"{type(e).__name__}: {e}") for _ in batch]
        for (_, future), answer in zip(batch, answers):
            if isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)
