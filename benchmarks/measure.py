"""Measurement windows: run the load generator once against one server and diff everything.

A window brackets one load-generator run with snapshots of Triton's statistics and of the
CPU time of the server and of the stubs that serve the workload's models. Windows of the
three backends are interleaved by the runner; `Summary` adds them up per backend.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import procinfo
from benchmarks.server import BenchServer
from benchmarks.workloads import Workload


class WindowFailed(RuntimeError):
    pass


@dataclass
class Summary:
    """Sums over every window of one (workload, backend) pair."""

    completed: int = 0
    errors: int = 0
    events: int = 0
    elapsed_s: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    stub_cpu_s: float = 0.0
    stat_count: int = 0
    backend_ns: int = 0
    windows: int = 0
    hist: Counter[int] = field(default_factory=Counter)
    first_error: str = ""
    stub_rss: int = 0  # after the last window

    def add(self, other: Summary) -> None:
        for name in (
            "completed",
            "errors",
            "events",
            "elapsed_s",
            "client_cpu_s",
            "server_cpu_s",
            "stub_cpu_s",
            "stat_count",
            "backend_ns",
            "windows",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.hist.update(other.hist)
        self.first_error = self.first_error or other.first_error
        self.stub_rss = other.stub_rss

    # -- derived numbers (None when there is nothing to divide) --
    def throughput(self) -> float | None:
        return self.completed / self.elapsed_s if self.elapsed_s > 0 else None

    def events_per_s(self) -> float | None:
        return self.events / self.elapsed_s if self.elapsed_s > 0 else None

    def percentile_us(self, q: float) -> float | None:
        total = sum(self.hist.values())
        if not total:
            return None
        rank, seen = math.ceil(q * total), 0
        for bucket in sorted(self.hist):
            seen += self.hist[bucket]
            if seen >= rank:
                return 10 ** ((bucket + 0.5) / 200) / 1000  # bucket = 200*log10(ns)
        return None

    def backend_us(self) -> float | None:
        return self.backend_ns / self.stat_count / 1000 if self.stat_count else None

    def share(self, cpu_s: float) -> float | None:
        return 100 * cpu_s / self.elapsed_s if self.elapsed_s > 0 else None

    def to_json(self) -> dict[str, object]:
        return {
            "throughput": self.throughput(),
            "events_per_s": self.events_per_s(),
            "p50_us": self.percentile_us(0.50),
            "p99_us": self.percentile_us(0.99),
            "backend_us": self.backend_us(),
            "stub_cpu_pct": self.share(self.stub_cpu_s),
            "server_cpu_pct": self.share(self.server_cpu_s),
            "client_cpu_pct": self.share(self.client_cpu_s),
            "stub_rss": self.stub_rss,
            "completed": self.completed,
            "errors": self.errors,
            "windows": self.windows,
            "first_error": self.first_error,
        }


def _stub_pids(server: BenchServer, models: tuple[str, ...], all_models: list[str]) -> list[int]:
    return [pid for pid, model in server.stubs(all_models).items() if model in models]


def run_window(
    server: BenchServer,
    workload: Workload,
    loadgen: Path,
    request_file: Path,
    seconds: float,
    min_requests: int,
    all_models: list[str],
) -> Summary:
    """One load-generator run against server, with everything it cost."""
    stubs = _stub_pids(server, workload.stub_models, all_models)
    before = server.stats(workload.model)
    stub0 = sum(procinfo.cpu_seconds(p) for p in stubs)
    server0 = procinfo.cpu_seconds(server.pid)
    cmd = [
        str(loadgen),
        str(server.port),
        str(request_file),
        str(workload.concurrency),
        f"{seconds:.3f}",
        str(min_requests),
    ] + (["sse"] if workload.payload.sse else [])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    except subprocess.TimeoutExpired as exc:
        raise WindowFailed("load generator timed out") from exc
    if done.returncode != 0:
        raise WindowFailed(f"load generator failed: {done.stderr.strip()[-300:]}")
    out = json.loads(done.stdout)
    after = server.stats(workload.model)
    window = Summary(
        completed=out["completed"],
        errors=out["errors"],
        events=out["events"],
        elapsed_s=out["elapsed_s"],
        client_cpu_s=out["cpu_user_s"] + out["cpu_sys_s"],
        server_cpu_s=procinfo.cpu_seconds(server.pid) - server0,
        stub_cpu_s=sum(procinfo.cpu_seconds(p) for p in stubs) - stub0,
        stat_count=after["count"] - before["count"],
        backend_ns=after["backend_ns"] - before["backend_ns"],
        windows=1,
        hist=Counter({int(b): int(c) for b, c in out["hist"]}),
        first_error=out["first_error"],
        stub_rss=sum(procinfo.rss_bytes(p) for p in stubs),
    )
    return window
