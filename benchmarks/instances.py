"""Instances that share a process (issue 29): memory, load time and throughput of a model
with 4 instances under PYBACKEND_INSTANCE_PROCESS own, shared and fork, on our backend.

    python -m benchmarks.instances                 # full run (minutes), Markdown tables
    python -m benchmarks.instances --quick         # seconds: checks every row can be produced
    python -m benchmarks.instances --heavy-import torch   # where torch is installed

Two models (benchmarks/models/instances_*.py), each under every mode, one tritonserver per
mode (explicit model control) alive for the model's whole run: the load requests of the
three are interleaved (own, shared, fork, then shared, fork, own ...), so are the
throughput windows. Ratios are against ``own`` on the same model in the same run. See
benchmarks/README.md, section "Instances that share a process".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks import instances_report
from benchmarks.instances_measure import Throughput, load_seconds, run_window, tree_memory, unload
from benchmarks.instances_repo import MODELS, MODES, heavy_modules, write_repository
from benchmarks.run import machine, revision
from benchmarks.server import BenchServer, ServerFailed
from pybackend.server import locate


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.instances",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="2 small instances, no heavy import")
    p.add_argument("--instances", type=int, default=4, help="instance count of each model")
    p.add_argument("--array-mib", type=int, default=256, help="size of the weights array")
    p.add_argument(
        "--heavy-import",
        default="auto",
        help='what the models import first: "auto" (torch if installed, else "default"), '
        '"default" (a large set installed here, instances_repo.DEFAULT_HEAVY), "none", '
        "or a comma list of modules",
    )
    p.add_argument("--matmuls", type=int, default=4, help="256x256 float32 matmuls per request")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--load-reps", type=int, default=5, help="load requests per mode (median)")
    p.add_argument("--window", type=float, default=3.0, help="seconds per throughput window")
    p.add_argument("--rounds", type=int, default=6, help="windows per mode, interleaved")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of unmeasured load first")
    p.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="OPENBLAS/OMP/MKL threads of the stubs (1: the instances are the parallelism)",
    )
    p.add_argument("--models", nargs="*", choices=[m.key for m in MODELS], help="default: both")
    p.add_argument("--json", type=Path, help="also write the raw results here")
    p.add_argument("--markdown", type=Path, help="also write the tables here")
    args = p.parse_args(argv)
    if args.quick:
        args.instances, args.array_mib, args.heavy_import = 2, 8, "none"
        args.load_reps, args.window, args.rounds, args.warmup = 1, 0.3, 1, 0.1
    if args.heavy_import == "auto":
        args.heavy_import = "torch" if importlib.util.find_spec("torch") else "default"
    missing = [m for m in heavy_modules(args.heavy_import) if not importlib.util.find_spec(m)]
    if missing:
        p.error(f"--heavy-import: not importable here: {', '.join(missing)}")
    return args


def blas_env(threads: int) -> dict[str, str]:
    n = str(threads)
    return {"OPENBLAS_NUM_THREADS": n, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}


def measure_model(args: argparse.Namespace, key: str, repo: Path, seed: int) -> dict[str, Any]:
    """Every mode of one model: load times, PSS, throughput; mode -> row."""
    rows: dict[str, dict[str, Any]] = {mode: {"load_s": []} for mode in MODES}
    slabs = args.array_mib * 2**20 // (256 * 256 * 4)
    with ExitStack() as stack:
        servers = {}
        for mode in MODES:
            server = BenchServer(
                "ours",
                repo,
                locate.our_backend_dir(),
                strict=False,
                args=["--model-control-mode=explicit"],
                env=blas_env(args.blas_threads),
            )
            stack.callback(server.stop)
            server.start(timeout=120)
            servers[mode] = server
        loaded: set[str] = set()
        for rep in range(args.load_reps):
            for mode in MODES[rep % 3 :] + MODES[: rep % 3]:
                row, name = rows[mode], f"{key}_{mode}"
                if "error" in row:
                    continue
                try:
                    if mode in loaded:
                        unload(servers[mode], name)
                    row["load_s"].append(load_seconds(servers[mode], name))
                    loaded.add(mode)
                except ServerFailed as exc:
                    row["error"] = str(exc).splitlines()[0][:300]
                    loaded.discard(mode)
        live = [m for m in MODES if m in loaded]
        for mode in live:
            rows[mode]["memory_loaded"] = tree_memory(servers[mode])
        sums = {mode: Throughput() for mode in live}

        def window(mode: str, seconds: float, n: int) -> Throughput:
            return run_window(
                servers[mode],
                f"{key}_{mode}",
                seconds=seconds,
                concurrency=args.concurrency,
                matmuls=args.matmuls,
                slabs=slabs,
                seed=seed + n,
            )

        for mode in live:
            warm = window(mode, args.warmup, 0)
            sums[mode].wrong += warm.wrong
        for rnd in range(args.rounds):
            turn = rnd % max(len(live), 1)
            for mode in live[turn:] + live[:turn]:
                sums[mode].add(window(mode, args.window, rnd + 1))
        for mode in live:
            row, total = rows[mode], sums[mode]
            row["memory_after"] = tree_memory(servers[mode])
            row.update(
                completed=total.completed,
                req_s=total.rate,
                p50_ms=total.p50_ms(),
                wrong=len(total.wrong),
                first_wrong=total.wrong[0] if total.wrong else "",
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.time()
    heavy = heavy_modules(args.heavy_import)
    results: dict[str, Any] = {
        "meta": {
            "command": "python -m benchmarks.instances "
            + shlex.join(argv if argv is not None else sys.argv[1:]),
            "revision": revision(),
            "machine": machine(),
            "loadavg_start": os.getloadavg(),
            "heavy_import": list(heavy),
            "instances": args.instances,
            "array_mib": args.array_mib,
            "matmuls": args.matmuls,
            "concurrency": args.concurrency,
            "blas_threads": args.blas_threads,
            "window_s": args.window,
            "rounds": args.rounds,
            "load_reps": args.load_reps,
        },
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-instances-") as tmp:
        repo = Path(tmp) / "repo"
        write_repository(repo, count=args.instances, array_mib=args.array_mib, heavy=heavy)
        for n, model in enumerate(MODELS):
            if args.models and model.key not in args.models:
                continue
            results["models"][model.key] = measure_model(args, model.key, repo, 100 * n)
    results["meta"]["loadavg_end"] = os.getloadavg()
    results["meta"]["minutes"] = (time.time() - started) / 60
    text = instances_report.render(results)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.markdown:
        args.markdown.write_text(text)
    bad = instances_report.failures(results)
    for line in bad:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
