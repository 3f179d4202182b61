"""Custom metrics as tritonserver's metrics registry keeps them, for the harness (in-process
and stub processes alike): what a model's ``pb_utils.MetricFamily`` and ``Metric`` calls
reach instead of the server.

The registry's rules, observed on tritonserver 2.51 with either Python backend:

- families are known by name: a second family of a name shares the first one's series (its
  kind must be the same, else "Family name already exists with different type"), and the
  series go once the last family of that name is deleted;
- one series per family name and label set, whichever family object or ``Metric`` made it
  (a histogram keeps the buckets it was first made with);
- each kind allows its operations only: counters increment (never by a negative value) and
  read, gauges increment, set and read, histograms observe; the rest is refused with the
  server's text.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..errors import PybackendError
from ..stub.failures import failed_request_text

KIND_NAMES = {
    0: "TRITONSERVER_METRIC_KIND_COUNTER",
    1: "TRITONSERVER_METRIC_KIND_GAUGE",
    2: "TRITONSERVER_METRIC_KIND_HISTOGRAM",
}
_ALLOWED = {0: {"increment", "value"}, 1: {"increment", "set", "value"}, 2: {"observe"}}
_OP_NAMES = {"increment": "Increment", "set": "Set", "observe": "Observe", "value": "Value"}
OTHER_KIND = "Family name already exists with different type"
NEGATIVE_COUNTER = (
    "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values."
)

Family = Tuple[str, str, int]  # name, description, kind


@dataclass
class MetricRecord:
    """One series: its family's name and kind, labels and value (a histogram's sum), and a
    histogram's observations and upper bounds."""

    family: str
    kind: int
    labels: Dict[str, str]
    value: float = 0.0
    observations: List[float] = field(default_factory=list)
    family_id: int = 0
    buckets: Optional[List[float]] = None  # a histogram's upper bounds


class MetricError(PybackendError):
    """An operation the server's metrics API refuses, in its words."""


class MetricStore:
    """Families and series by id. Every call may come from any thread."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.families: Dict[int, Family] = {}
        #: One record per series, under the id of the first metric made for it.
        self.metrics: Dict[int, MetricRecord] = {}
        self._series_of: Dict[int, int] = {}  # every metric id -> its series' id
        self._ids = itertools.count(1)

    def family_new(self, name: str, description: str, kind: int) -> int:
        with self.lock:
            if any(n == name and k != kind for n, _, k in self.families.values()):
                raise MetricError(OTHER_KIND)
            fid = next(self._ids)
            self.families[fid] = (name, description, kind)
            return fid

    def family_delete(self, family_id: int) -> Optional[Family]:
        """The family gone; the last of its name takes its series along."""
        with self.lock:
            family = self.families.pop(family_id, None)
            if family is None or any(n == family[0] for n, _, _ in self.families.values()):
                return family
            gone = {sid for sid, record in self.metrics.items() if record.family == family[0]}
            for sid in gone:
                del self.metrics[sid]
            self._series_of = {m: s for m, s in self._series_of.items() if s not in gone}
            return family

    def metric_new(
        self, family_id: int, labels: Dict[str, str], buckets: Optional[List[float]]
    ) -> int:
        """A metric id for the family's series of ``labels`` (raises KeyError for a family
        that is gone)."""
        with self.lock:
            name, _, kind = self.families[family_id]
            mid = next(self._ids)
            series = next(
                (s for s, r in self.metrics.items() if r.family == name and r.labels == labels),
                None,
            )
            if series is None:
                series = mid
                self.metrics[mid] = MetricRecord(
                    name, kind, dict(labels), family_id=family_id, buckets=buckets
                )
            self._series_of[mid] = series
            return mid

    def op(self, op: str, metric_id: int, value: float = 0.0) -> float:
        """``increment``, ``set``, ``observe`` or ``value`` on a metric; its value after
        (raises KeyError for a metric that is gone, MetricError for a refused operation)."""
        with self.lock:
            record = self.metrics[self._series_of[metric_id]]
            if op not in _ALLOWED[record.kind]:
                raise MetricError(f"{KIND_NAMES[record.kind]} does not support {_OP_NAMES[op]}")
            if op == "increment":
                if record.kind == 0 and value < 0:
                    raise MetricError(NEGATIVE_COUNTER)
                record.value += value
            elif op == "set":
                record.value = value
            elif op == "observe":
                record.observations.append(value)
                record.value += value
            return record.value

    def snapshot(self) -> Tuple[Dict[int, Family], Dict[int, MetricRecord]]:
        """Copies of the families and series (for a reader on another thread)."""
        with self.lock:
            return dict(self.families), dict(self.metrics)


def metric_refusal(instance_name: str, message: str) -> str:
    """A refusal as the backend hands it to the stub (pb_utils puts the operation first)."""
    return failed_request_text(instance_name, message)
