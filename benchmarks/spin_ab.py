"""The sync spin's A/B (issue 31 part 2, docs/protocol.md "The spin"): the single-round-trip
rows of ``benchmarks.run`` with our backend's spin in one setting against another (by default
auto mode against the spin forced off, ``ipc-spin-us=0``), each run measuring the original in
the same windows, runs interleaved (A, B, B, A, ...), and the spread over the runs.

    python -m benchmarks.spin_ab                      # 3 runs a side, the rows below
    python -m benchmarks.spin_ab --sides 300,auto     # a fixed 300 µs spin against auto
    python -m benchmarks.spin_ab --sides auto,auto/100 --workloads bls   # the BLS answer's poll
    python -m benchmarks.spin_ab --runs 1 --window 0.05 --rounds 1   # a smoke run

It first prints the decision the backend logs for a one-instance model on this machine
("sync spin 100 us (auto: 16 usable cores, ...)" on the GPU machine's 16 cores; "off" on
2 vCPUs, where the A/B measures the same path twice). Bounded by ``--budget`` seconds: a run
that would not fit is left out, and the table says how many ran. scripts/gpu_cpu_bench.sh
runs it on the GPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report, repository
from pybackend.server import TritonServer

ROWS = ["tiny_c1", "add_sub", "4k_c1", "bls", "tiny_c16", "2inst_c8"]


def _knob(key: str, value: str) -> str:
    if value == "auto":
        return ""
    if value == "off":
        return f"{key}=0"
    if value.isdigit():
        return f"{key}={int(value)}"
    raise ValueError(f"a side is auto, off or a number of microseconds, not {value!r}")


def side_config(side: str) -> str:
    """PYBACKEND_BENCH_OURS_CONFIG for a side: SYNC[/BLS], each auto (the default), off or µs
    to spin: the sync spin (ipc-spin-us) and, after a slash, the BLS answer's poll
    (ipc-bls-spin-us; auto when left out: ten sync spins). "auto/100" is auto mode with the
    BLS answer polled one sync spin where auto polls 100 µs, as before that setting existed;
    "auto/off" not at all."""
    sync, slash, bls = side.partition("/")
    parts = [_knob("ipc-spin-us", sync)] + ([_knob("ipc-bls-spin-us", bls)] if slash else [])
    return ",".join(p for p in parts if p)


def decision() -> str:
    """The backend's verbose line for a one-instance model, as logged on this machine."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "models"
        repository.write_repository(repo, native=False, names=("identity",))
        with TritonServer(repo, backend="ours", extra_args=["--log-verbose=1"]) as server:
            text = server.log_text()
    found = re.findall(r"model '\w+': sync spin [^\"\n]*", text)
    found += re.findall(r"model '\w+': BLS answer spin [^\"\n]*", text)
    return "; ".join(found) if found else "no 'sync spin' line in the log (an older backend?)"


def one_run(side: str, args: argparse.Namespace, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "benchmarks.run", "--backends", "original,ours"]
        cmd += ["--workloads", *args.workloads, "--load-reps", "1", "--json", str(out)]
        cmd += ["--window", str(args.window), "--rounds", str(args.rounds)]
        cmd += ["--warmup", str(args.warmup)]
        env = dict(os.environ, PYBACKEND_BENCH_OURS_CONFIG=side_config(side))
        subprocess.run(cmd, env=env, timeout=timeout, check=True, capture_output=True)
        return json.loads(out.read_text())


def value(results: dict[str, Any], key: str, metric: str, ratio: bool) -> float | None:
    """Ours, or ours over the original of the same run."""
    ours = report._get(results, key, "ours", metric)
    if not ratio or ours is None:
        return ours
    orig = report._get(results, key, "original", metric)
    return ours / orig if orig else None


def cell(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    mid = fmt.format(statistics.median(values))
    if len(values) == 1:
        return mid
    return f"{mid} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.spin_ab", description=__doc__)
    p.add_argument("--runs", type=int, default=3, help="runs per side")
    p.add_argument(
        "--sides",
        default="auto,off",
        help="the two spin settings, SYNC[/BLS] each: auto, off or µs (auto,off; auto/100 "
        "is auto mode with the BLS answer polled one 100 µs sync spin, as before)",
    )
    p.add_argument("--window", type=float, default=0.3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=float, default=0.1)
    p.add_argument("--workloads", nargs="*", default=ROWS)
    p.add_argument("--budget", type=float, default=600.0, help="seconds for everything")
    args = p.parse_args(argv)
    a, b = sides = tuple(args.sides.split(","))  # type: ignore[misc]
    for side in sides:
        side_config(side)  # refuses a bad side before anything runs
    t0 = time.monotonic()
    print(f"decision: {decision()}", flush=True)
    print(f"load average: {os.getloadavg()[0]:.2f}, cores: {len(os.sched_getaffinity(0))}")
    order = [(a, b) if i % 2 == 0 else (b, a) for i in range(args.runs)]
    results: dict[str, list[dict[str, Any]]] = {a: [], b: []}
    longest = 0.0
    for pair in order:
        for side in pair:
            left = args.budget - (time.monotonic() - t0)
            if left < max(longest * 1.2, 10.0):
                print(f"stopped: {left:.0f}s left, a run took {longest:.0f}s", flush=True)
                break
            start = time.monotonic()
            try:
                results[side].append(one_run(side, args, left))
            except (subprocess.SubprocessError, OSError, ValueError) as exc:
                print(f"run {side} failed: {exc}", flush=True)
            longest = max(longest, time.monotonic() - start)
            print(f"run {side} done in {time.monotonic() - start:.0f}s", flush=True)
    print()
    print(f"runs: {a} {len(results[a])}, {b} {len(results[b])}; median (min-max)")
    print()
    print(
        f"| row | backend ours/orig, {a} | backend ours/orig, {b} | ours backend µs {a} "
        f"| ours backend µs {b} | req/s ours/orig {a} | req/s ours/orig {b} "
        f"| ours stub CPU % {a} | ours stub CPU % {b} |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for key in args.workloads:
        cols = []
        for metric, ratio, fmt in (
            ("backend_us", True, "{:.2f}"),
            ("backend_us", False, "{:.0f}"),
            ("rate", True, "{:.2f}"),
            ("stub_cpu_pct", False, "{:.0f}"),
        ):
            for side in sides:
                vals = [v for r in results[side] if (v := value(r, key, metric, ratio)) is not None]
                cols.append(cell(vals, fmt))
        print(f"| {key} | " + " | ".join(cols) + " |")
    print(f"\ntotal {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
