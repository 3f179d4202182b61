"""The development server's metrics endpoint: the models' custom metrics (``pb_utils.
MetricFamily``) in Prometheus' text format, as tritonserver's ``/metrics`` shows them (the
server's own ``nv_*`` families are not there: nothing here measures what they count)."""

from __future__ import annotations

import bisect
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterable, List, Mapping, Tuple

from ..testing.transport import MetricRecord, harness_transport

#: A source of metrics: its families (id -> name, description, kind) and its metrics.
Source = Tuple[Mapping[int, Tuple[str, str, int]], Iterable[MetricRecord]]

KINDS = {0: "counter", 1: "gauge", 2: "histogram"}  # pb_utils.MetricFamily's kinds


def sources(models: Iterable[Any]) -> List[Source]:
    """The metrics of the served harnesses: each model's stub processes share a registry,
    the models run in this process share one, each read once."""
    stores: List[Any] = []
    for model in models:
        store = getattr(model, "metric_store", None)  # StubModel
        if model is not None and store is None:
            store = harness_transport().metric_store
        if store is not None and all(store is not seen for seen in stores):
            stores.append(store)
    found: List[Source] = []
    for store in stores:
        families, metrics = store.snapshot()
        found.append((families, metrics.values()))
    return found


def exposition(found: Iterable[Source]) -> str:
    """Prometheus text: a family (HELP, TYPE) per name, merged across models as the server
    merges them, then its live series; a deleted family is gone with its series."""
    families: Dict[str, Tuple[str, int]] = {}
    series: Dict[str, List[MetricRecord]] = {}
    for by_id, records in found:
        for name, description, kind in by_id.values():
            families.setdefault(name, (description, kind))
            series.setdefault(name, [])
        live = {name for name, _, _ in by_id.values()}
        for record in records:
            if record.family in live:  # a series lives while a family of its name does
                series[record.family].append(record)
    lines: List[str] = []
    for name, (description, kind) in families.items():
        lines.append(f"# HELP {name} {description}")
        lines.append(f"# TYPE {name} {KINDS.get(kind, 'untyped')}")
        for record in series[name]:
            lines.extend(_samples(name, record))
    return "\n".join(lines) + "\n" if lines else ""


def _samples(name: str, record: MetricRecord) -> List[str]:
    labels = record.labels
    if record.kind != 2:
        return [f"{name}{_labels(labels)} {_number(record.value)}"]
    seen = sorted(record.observations)
    out = [
        f"{name}_count{_labels(labels)} {len(seen)}",
        f"{name}_sum{_labels(labels)} {_number(record.value)}",
    ]
    for bound in [*(record.buckets or []), float("inf")]:
        count = bisect.bisect_right(seen, bound)  # observations <= bound: seen is sorted
        out.append(f"{name}_bucket{_labels({**labels, 'le': _number(bound)})} {count}")
    return out


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    escaped = (
        str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        for v in labels.values()
    )
    return "{" + ",".join(f'{k}="{v}"' for k, v in zip(labels, escaped)) + "}"


def _number(value: float) -> str:
    """A double as Prometheus reads it: whole numbers without a point, +Inf, NaN."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() else repr(value)


class MetricsServer(ThreadingHTTPServer):
    """``GET /metrics`` on a port of its own, as tritonserver serves it."""

    daemon_threads = True

    def __init__(self, address: Tuple[str, int], text: Callable[[], str]) -> None:
        super().__init__(address, _MetricsHandler)
        self.text = text


class _MetricsHandler(BaseHTTPRequestHandler):
    server: MetricsServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapers ask every few seconds: printing each would hide the model's output

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        try:
            body = self.server.text().encode()
        except Exception as e:  # noqa: BLE001 - a scraper gets the error, the server goes on
            self.send_error(500, f"pybackend devserver: metrics failed: {e!r}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
