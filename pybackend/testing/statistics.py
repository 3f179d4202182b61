"""A model's inference statistics as tritonserver counts them (its ``/v2/models/<m>/stats``),
kept by the harness for every ``execute`` it runs: the development server serves them, and
a test can read them (``model.statistics.snapshot()``).

tritonserver's rules, as 2.51 applies them with either Python backend:

- a request that completes counts once in ``success`` (queue start to completion) and in
  ``queue``, ``compute_input``, ``compute_infer`` and ``compute_output`` with the durations
  of the execute that ran it (every request of a batch gets the batch's), and adds its batch
  size (its first dimension for a model with ``max_batch_size``, else 1) to
  ``inference_count``;
- a request that fails in its execute counts only in ``fail`` (queue start to the error);
  an error response the model made itself is an answer: its request completes, as the
  original counts it (the backend's own errors are ``FailedRequestResponse``);
- every execute counts once in ``execution_count`` and in ``batch_stats`` under the batch's
  size (the sum of its requests'), whatever became of its requests;
- a request refused before it reached the model (wrong shape, unknown input, a full queue)
  counts nowhere; one a dynamic batcher's queue timeout refused counts only in ``fail``.

Cache, response and memory statistics stay empty, as tritonserver has them for these models.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Sequence, Tuple

#: The per-request durations tritonserver reports beside ``success`` and ``fail``.
STAGES = ("compute_input", "compute_infer", "compute_output")


@dataclass
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int) -> None:
        self.count += 1
        self.ns += max(0, ns)

    def as_json(self) -> Dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass
class ExecuteTimes:
    """``time.monotonic_ns()`` marks around one execute: its turn came (the requests leave
    the queue), the model has its requests, the model returned, the responses are ready."""

    start: int = field(default_factory=time.monotonic_ns)
    inputs_ready: int = 0
    returned: int = 0
    end: int = 0

    def mark_inputs_ready(self) -> None:
        self.inputs_ready = time.monotonic_ns()

    def mark_returned(self) -> None:
        self.returned = time.monotonic_ns()

    def finish(self) -> "ExecuteTimes":
        """Closes the marks; one the execute never reached (it failed first) takes the
        time of the next, so every stage has a duration."""
        self.end = time.monotonic_ns()
        self.returned = self.returned or self.end
        self.inputs_ready = self.inputs_ready or self.returned
        return self

    def stages(self) -> Tuple[int, int, int]:
        return (
            self.inputs_ready - self.start,
            self.returned - self.inputs_ready,
            self.end - self.returned,
        )


#: One request of an execute: (when it was queued, its batch size, whether it completed).
Outcome = Tuple[int, int, bool]


class InferenceStatistics:
    """One model version's counters; :meth:`record` is called once per execute (from any
    thread), :meth:`snapshot` reads them as tritonserver's JSON."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.last_inference_ms = 0
        self.inference_count = 0
        self.execution_count = 0
        self.success = Duration()
        self.fail = Duration()
        self.queue = Duration()
        self.stages = {name: Duration() for name in STAGES}
        self.batches: Dict[int, Dict[str, Duration]] = {}

    def record(self, times: ExecuteTimes, outcomes: Iterable[Outcome]) -> None:
        """One execute and the requests it finished (a request it released to be
        rescheduled is left out: it counts in the execute that finishes it)."""
        outcomes = list(outcomes)
        durations = times.stages()
        with self._lock:
            self.execution_count += 1
            self.last_inference_ms = time.time_ns() // 1_000_000
            size = sum(rows for _, rows, _ in outcomes) or 1
            batch = self.batches.setdefault(size, {name: Duration() for name in STAGES})
            for name, ns in zip(STAGES, durations):
                batch[name].add(ns)
            for queued, rows, ok in outcomes:
                if not ok:
                    self.fail.add(times.end - queued)
                    continue
                self.inference_count += rows
                self.success.add(times.end - queued)
                self.queue.add(times.start - queued)
                for name, ns in zip(STAGES, durations):
                    self.stages[name].add(ns)

    def record_expired(self, queued_ns: int) -> None:
        """A request that its queue policy's timeout refused before any execute."""
        with self._lock:
            self.fail.add(time.monotonic_ns() - queued_ns)

    def snapshot(self) -> Dict[str, Any]:
        """tritonserver's ``model_stats`` entry, less the model's name and version."""
        with self._lock:
            return {
                "last_inference": self.last_inference_ms,
                "inference_count": self.inference_count,
                "execution_count": self.execution_count,
                "inference_stats": {
                    "success": self.success.as_json(),
                    "fail": self.fail.as_json(),
                    "queue": self.queue.as_json(),
                    **{name: d.as_json() for name, d in self.stages.items()},
                    "cache_hit": Duration().as_json(),
                    "cache_miss": Duration().as_json(),
                },
                "response_stats": {},
                "batch_stats": [
                    {"batch_size": size, **{n: d.as_json() for n, d in stages.items()}}
                    for size, stages in sorted(self.batches.items())
                ],
                "memory_usage": [],
            }


def batch_size_of(max_batch_size: int, shapes: Iterable[Sequence[int]]) -> int:
    """A request's batch size as the server counts it: the first dimension of its first
    input for a model that batches, else 1."""
    if max_batch_size <= 0:
        return 1
    for shape in shapes:
        return int(shape[0]) if len(shape) else 1
    return 1
