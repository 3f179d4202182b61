"""``pb_utils.MetricFamily`` (custom metrics): routed through the transport, which
reports them unsupported until the metrics bridge lands."""

from __future__ import annotations

import enum
from typing import Any

from . import transport as _transport


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class MetricFamily:
    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: int) -> None:
        self._impl: Any = _transport._current.metric_family(name, description, int(kind))

    def Metric(self, labels: Any = None, buckets: Any = None) -> Any:  # noqa: N802 - upstream's name
        return self._impl.Metric(labels=labels, buckets=buckets)
