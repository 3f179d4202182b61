"""``pb_utils.MetricFamily`` and ``Metric`` (custom metrics, spec 3.2).

Families and metrics live in the server (``TRITONSERVER_MetricFamily``/``Metric``); these
objects hold the ids the transport hands out. Argument checks and error texts follow the
original; errors of the server's metrics API come back from the transport and get the
operation's prefix here.

Lifetimes are the original's: a family keeps its metrics (a dropped or temporary ``Metric``
stays on the endpoint with its value), and deleting the family (dropping the last reference to
it) deletes them all and invalidates the ``Metric`` objects still held; a metric never keeps
its family alive. One server metric per label set (and buckets) of a family serves every
``Metric`` object made for it, so creating temporaries in ``execute`` leaks nothing.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import transport as _transport
from .arguments import as_float, as_instance, as_string, cast_in_body
from .errors import TritonModelException
from .pybind_enum import PybindEnum

FAMILY_DELETED = (
    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The "
    "'MetricFamily' object should be deleted AFTER its corresponding 'Metric' objects have "
    "been deleted."
)


class MetricKind(PybindEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class _FamilyState:
    """What a family's metrics share with it: the id and whether it is gone. Metrics hold
    this, not the family, so dropping the family really deletes it."""

    __slots__ = ("family_id", "kind", "deleted", "transport", "metric_ids")

    def __init__(self, family_id: int, kind: MetricKind, transport: _transport.Transport) -> None:
        self.family_id = family_id
        self.kind = kind
        self.deleted = False
        self.transport = transport
        # (labels, buckets) -> the server metric made for them
        self.metric_ids: Dict[Tuple[Tuple[Tuple[str, str], ...], Any], int] = {}


class Metric:
    """One label set of a family. Created with ``MetricFamily.Metric(labels, buckets)``."""

    def __init__(self, family: _FamilyState, metric_id: int) -> None:
        self._family = family
        self._id = metric_id

    def _call(self, op: str, prefix: str, value: float = 0.0) -> float:
        if self._family.deleted:
            raise TritonModelException(prefix + FAMILY_DELETED)
        try:
            return self._family.transport.metric_op(op, self._id, value)
        except TritonModelException as e:
            raise TritonModelException(prefix + str(e)) from None

    # value: positional only, as the original's binding (which names no arguments)
    def increment(self, value: float, /) -> None:
        """Add ``value`` (counters: non-negative only; not for histograms)."""
        value = as_float(value, "increment", "value")
        self._call("increment", "Failed to increment metric value: ", value)

    def set(self, value: float, /) -> None:
        """Gauges only."""
        value = as_float(value, "set", "value")
        self._call("set", "Failed to set metric value: ", value)

    def observe(self, value: float, /) -> None:
        """Histograms only."""
        value = as_float(value, "observe", "value")
        self._call("observe", "Failed to observe metric value: ", value)

    def value(self) -> float:
        """The current value (counters and gauges)."""
        return self._call("value", "Failed to get metric value: ")


class MetricFamily:
    """``MetricFamily(name, description, kind)``: a family of one kind in the server."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        name = as_string(name, "MetricFamily", "name")
        description = as_string(description, "MetricFamily", "description")
        kind = as_instance(
            kind, MetricKind, "MetricFamily", "kind", "MetricFamily.COUNTER, GAUGE or HISTOGRAM"
        )
        transport = _transport.get_transport()
        try:
            family_id = transport.metric_family_new(name, description, int(kind))
        except TritonModelException as e:
            raise TritonModelException(f"Error when creating MetricFamily: {e}") from None
        self._state = _FamilyState(family_id, kind, transport)

    def Metric(  # noqa: N802 - upstream's name
        self, labels: Optional[Dict[str, str]] = None, buckets: Optional[List[float]] = None
    ) -> Metric:
        """A metric of this family for ``labels`` (dict str -> str); ``buckets`` (a list of
        upper bounds) is required for histograms and refused otherwise."""
        if labels is not None and not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None:
            if not isinstance(buckets, list):
                raise TritonModelException("Failed to create metric. Buckets must be a list.")
            if self._state.kind != MetricKind.HISTOGRAM:
                raise TritonModelException("Failed to create metric. Unexpected buckets found.")
            bounds: Optional[List[float]] = [cast_in_body(b, as_float) for b in buckets]
        elif self._state.kind == MetricKind.HISTOGRAM:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        else:
            bounds = None
        pairs = {}
        for key, value in (labels or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TritonModelException(
                    "Error when creating Metric: label names and values must be strings, "
                    f"got {key!r}: {value!r}"
                )
            pairs[key] = value
        state = self._state
        ident = (tuple(sorted(pairs.items())), None if bounds is None else tuple(bounds))
        metric_id = state.metric_ids.get(ident)
        if metric_id is None:
            try:
                metric_id = state.transport.metric_new(state.family_id, pairs, bounds)
            except TritonModelException as e:
                raise TritonModelException(f"Error when creating Metric: {e}") from None
            metric_id = state.metric_ids.setdefault(ident, metric_id)
        return Metric(state, metric_id)

    def __del__(self) -> None:
        state = getattr(self, "_state", None)
        if state is not None and not state.deleted:
            state.deleted = True  # its metrics now fail with FAMILY_DELETED
            state.transport.metric_family_delete(state.family_id)
