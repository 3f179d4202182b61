"""The dynamic batcher of a model with ``dynamic_batching`` and a ``max_batch_size``:
requests that arrive together meet in one ``execute``, as under tritonserver, so that
``pb_utils.batch_requests`` and other batch-aware code see real batches in development.

When an instance is free, the queued requests (in arrival order, up to ``max_batch_size``
rows) are sent by the rules observed on tritonserver 2.51 (tests/devserver/
test_batching_differential.py):

- once the oldest has waited ``max_queue_delay_microseconds`` (when that is set): all of them;
- else, when their rows reach a preferred batch size at a request boundary: the first
  requests up to the largest such size, at once (the rest make a later batch), with or
  without a queue delay;
- else, when no queue delay is set, or the next request would pass ``max_batch_size``: all;
- else they wait for more requests or for the delay.

Queue policies and priority levels (``default_queue_policy``, ``priority_queue_policy``,
``priority_levels``), also as observed: a request's ``priority`` (1 first; 0 or past the
levels: the default level) orders the queue, arrival order within a level; a request past a
level's ``max_queue_size`` is refused at once; one that has waited longer than its level's
``default_timeout_microseconds`` is refused when a batch is next formed (REJECT), or is
kept (DELAY; here it goes behind the others of its level, which is where tritonserver most
often runs it, but not always). A request's own ``timeout`` replaces that default
where ``allow_timeout_override`` is set and it is shorter (never where there is none)."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from ..utils.errors import ErrorCode
from .call import InferCall
from .errors import ServeError

Item = Tuple[InferCall, "Future[Dict[str, np.ndarray]]"]


def batching_of(config: Mapping[str, Any]) -> Optional[Tuple[int, float, Tuple[int, ...]]]:
    """(max_batch_size, queue delay in seconds, preferred batch sizes) when the model has a
    dynamic batcher."""
    max_batch = int(config.get("max_batch_size", 0) or 0)
    batching = config.get("dynamic_batching")
    if batching is None or max_batch <= 0:
        return None
    delay_us = int(batching.get("max_queue_delay_microseconds", 0) or 0)
    preferred = tuple(int(p) for p in batching.get("preferred_batch_size", []) or [])
    return max_batch, delay_us / 1e6, preferred


@dataclass(frozen=True)
class QueuePolicy:
    """One priority level's ModelQueuePolicy (0: no limit, no timeout)."""

    max_queue_size: int = 0
    timeout_s: float = 0.0
    delay_on_timeout: bool = False  # timeout_action DELAY (else REJECT)
    allow_override: bool = False  # a request's own shorter timeout counts

    def timeout_of(self, call: InferCall) -> float:
        """Seconds ``call`` may wait in the queue (0: no limit)."""
        own = call.timeout_us / 1e6
        if self.allow_override and 0 < own < self.timeout_s:
            return own
        return self.timeout_s


@dataclass(frozen=True)
class QueueRules:
    """The queue settings of a ``dynamic_batching`` section."""

    levels: int = 0  # priority_levels; 0: one queue
    default_level: int = 0
    default: QueuePolicy = QueuePolicy()
    per_level: Dict[int, QueuePolicy] = field(default_factory=dict)

    @classmethod
    def of(cls, batching: Mapping[str, Any]) -> "QueueRules":
        def policy(p: Mapping[str, Any]) -> QueuePolicy:
            return QueuePolicy(
                max_queue_size=int(p.get("max_queue_size", 0) or 0),
                timeout_s=int(p.get("default_timeout_microseconds", 0) or 0) / 1e6,
                delay_on_timeout=str(p.get("timeout_action", "REJECT")) == "DELAY",
                allow_override=bool(p.get("allow_timeout_override", False)),
            )

        levels = int(batching.get("priority_levels", 0) or 0)
        per = batching.get("priority_queue_policy") or {}
        return cls(
            levels=levels,
            default_level=int(batching.get("default_priority_level", 0) or 0),
            default=policy(batching.get("default_queue_policy") or {}),
            per_level={int(k): policy(v) for k, v in per.items()},
        )

    def level_of(self, priority: int) -> int:
        return priority if 1 <= priority <= self.levels else self.default_level

    def policy_of(self, level: int) -> QueuePolicy:
        return self.per_level.get(level, self.default)


def rows(call: InferCall) -> int:
    """A request's batch size: the first dimension of its inputs."""
    for array in call.inputs.values():
        return int(array.shape[0]) if array.ndim else 1
    return 1


def plan(
    sizes: Sequence[int], max_batch: int, preferred: Sequence[int], delayed: bool, waited: bool
) -> Optional[int]:
    """How many of the queued requests (their rows in ``sizes``, in queue order) go now as one
    batch, or None to wait for more. ``delayed``: a queue delay is set; ``waited``: the
    oldest has waited it out."""
    total = count = best = 0
    full = False
    for n in sizes:
        if count and total + n > max_batch:
            full = True  # the batch cannot grow past this request
            break
        total += n
        count += 1
        if total in preferred:
            best = count
        if total >= max_batch:
            full = True
            break
    if delayed and waited:
        return count
    if best:
        return best
    return count if full or not delayed else None


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
        preferred: Sequence[int] = (),
        rules: QueueRules = QueueRules(),
        on_expired: Callable[[InferCall], None] = lambda call: None,
    ) -> None:
        self.max_batch = max_batch
        self.delay_s = delay_s
        self.preferred = tuple(preferred)
        self.rules = rules
        self._on_expired = on_expired  # a queue timeout refused this call (statistics)
        self._queued: Dict[int, int] = {}  # requests waiting per priority level
        self._delayed: Set[int] = set()  # id() of the calls a DELAY timeout put behind
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
            level = self.rules.level_of(call.priority)
            limit = self.rules.policy_of(level).max_queue_size
            if limit and self._queued.get(level, 0) >= limit:
                raise ServeError(
                    f"[request id: {call.request_id or '<id_unknown>'}] Exceeds maximum queue size",
                    ErrorCode.UNAVAILABLE,
                )
            self._queued[level] = self._queued.get(level, 0) + 1
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
        waiting: List[Item] = []  # queued here in arrival order, none sent yet
        closing = False
        while True:
            self._free.acquire()  # a worker (instance) is free: gather its batch
            while True:
                if not waiting:
                    if closing:
                        self._free.release()
                        return
                    first = self._queue.get()
                    if first is None:
                        self._free.release()
                        return
                    waiting.append(first)
                closing = self._drain(waiting) or closing
                self._expire(waiting)
                if not waiting:
                    continue
                order = sorted(waiting, key=self._rank)  # stable: arrival order within
                oldest_ns = order[0][0].queued_ns
                waited_s = (time.monotonic_ns() - oldest_ns) / 1e9
                sizes = [rows(call) for call, _ in order]
                delayed = self.delay_s > 0 and not closing  # closing: all that waits goes
                waited = waited_s >= self.delay_s
                count = plan(sizes, self.max_batch, self.preferred, delayed, waited)
                if count is not None:
                    batch = order[:count]
                    self._leave(waiting, batch)
                    self._start(batch)
                    break
                try:  # wait for one more request, or for the delay to run out
                    item = self._queue.get(timeout=max(0.0, self.delay_s - waited_s))
                except queue.Empty:
                    continue
                if item is None:
                    closing = True
                else:
                    waiting.append(item)

    def _rank(self, item: Item) -> Tuple[int, bool]:
        call = item[0]
        return self.rules.level_of(call.priority), id(call) in self._delayed

    def _expire(self, waiting: List[Item]) -> None:
        """Applies the levels' queue timeouts: REJECT answers a request that waited too long
        with an error, DELAY puts it behind the others of its level."""
        now = time.monotonic_ns()
        rejected = []
        for item in waiting:
            call = item[0]
            policy = self.rules.policy_of(self.rules.level_of(call.priority))
            limit = policy.timeout_of(call)
            if not limit or (now - call.queued_ns) / 1e9 < limit:
                continue
            if policy.delay_on_timeout:
                self._delayed.add(id(call))
            else:
                rejected.append(item)
        if rejected:
            self._leave(waiting, rejected)
            for call, future in rejected:
                self._on_expired(call)
                future.set_exception(ServeError("Request timeout expired", ErrorCode.UNAVAILABLE))

    def _leave(self, waiting: List[Item], items: List[Item]) -> None:
        """``items`` leave the queue (batched or refused): out of ``waiting`` and the
        counts."""
        gone = {id(item) for item in items}
        waiting[:] = [item for item in waiting if id(item) not in gone]
        with self._lock:
            for call, _ in items:
                level = self.rules.level_of(call.priority)
                self._queued[level] -= 1
                self._delayed.discard(id(call))

    def _drain(self, waiting: List[Item]) -> bool:
        """Moves what is queued now into ``waiting``; True when the end mark was among it."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return False
            if item is None:
                return True
            waiting.append(item)

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
