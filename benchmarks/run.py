"""Run the benchmark: ours vs the original Python backend vs the native floor, one run.

    python -m benchmarks.run            # full run (minutes), prints Markdown tables
    python -m benchmarks.run --quick    # seconds: checks that every row can be produced

All three backends run on the same tritonserver binary at the same time (one server each,
idle while another is measured) and their measurement windows are interleaved (A,B,C then
B,C,A ...), so machine noise hits all of them alike. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import build, micro, procinfo, report, repository
from benchmarks.measure import Summary, WindowFailed, run_window
from benchmarks.payloads import send_once
from benchmarks.server import BenchServer, ServerFailed
from benchmarks.workloads import BURST_WORKLOAD, Workload, select
from pybackend.server import locate

BACKENDS = report.BACKENDS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick", action="store_true", help="tiny windows, one round: checks the benchmark works"
    )
    p.add_argument("--window", type=float, default=1.5, help="seconds per measurement window")
    p.add_argument("--rounds", type=int, default=4, help="windows per backend and workload")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds of unmeasured load first")
    p.add_argument(
        "--load-reps", type=int, default=5, help="server starts per backend for load time"
    )
    p.add_argument("--workloads", nargs="*", help="workload keys (default: all)")
    p.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma list of original,ours,native"
    )
    p.add_argument("--json", type=Path, help="also write the raw results here")
    p.add_argument("--markdown", type=Path, help="also write the tables here")
    args = p.parse_args(argv)
    if args.quick:
        args.window, args.rounds, args.warmup, args.load_reps = 0.05, 1, 0.0, 1
    return args


def backend_dirs(wanted: list[str], native_dir: Path) -> dict[str, Path | str]:
    """kind -> backends directory, or the reason it cannot run here."""
    found: dict[str, Path | str] = {}
    for kind in wanted:
        try:
            if kind == "native":
                found[kind] = native_dir
            elif kind == "ours":
                lib = locate.our_backend_library()
                found[kind] = locate.our_backend_dir() if lib.is_file() else "not built"
            else:
                locate.original_venv()
                found[kind] = locate.original_backend_dir()
        except (FileNotFoundError, ValueError) as exc:
            found[kind] = f"unavailable: {str(exc).splitlines()[0][:80]}"
    return found


def revision() -> str:
    """The commit measured, and whether the tree had uncommitted changes."""
    sent = os.environ.get("GPU_CHECK_REVISION")
    if sent:
        # The GPU machine gets a copy of the tree whose .git can be stale: the revision the
        # check was sent with is the truth there (scripts/gpu_check.sh).
        return f"{sent} (as sent to the GPU machine)"
    repo = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        cmd = ["git", "-C", str(repo), *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" + uncommitted changes" if dirty else "")


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    python = platform.python_version()
    return f"{model}, {os.cpu_count()} CPUs, Linux {platform.release()}, Python {python}"


def measure_load_times(dirs: dict[str, Path], reps: int, tmp: Path) -> dict[str, Any]:
    """Server start to READY with one trivial model, interleaved over backends."""
    repos = {}
    for kind in dirs:
        repos[kind] = tmp / f"load-{kind}"
        repository.write_repository(repos[kind], native=kind == "native", names=("identity",))
    samples: dict[str, list[float]] = {k: [] for k in dirs}
    errors: dict[str, str] = {}
    for rep in range(reps):
        kinds = list(dirs)
        for kind in kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]:
            if kind in errors:
                continue
            server = BenchServer(kind, repos[kind], dirs[kind], strict=True)
            try:
                samples[kind].append(server.start(timeout=60))
            except ServerFailed as exc:
                errors[kind] = str(exc).splitlines()[0]
            finally:
                server.stop()
    out: dict[str, Any] = {}
    for kind, values in samples.items():
        if kind in errors or not values:
            out[kind] = {"error": errors.get(kind, "no sample")}
        else:
            out[kind] = {"median_s": sorted(values)[len(values) // 2], "samples_s": values}
    return out


def memory_snapshot(server: BenchServer, models: list[str], stub_model: str) -> dict[str, int]:
    stubs = server.stubs(models)
    pids = [server.pid, *stubs]
    shm = procinfo.shm_usage(pids)
    rss = sum(procinfo.rss_bytes(p) for p, m in stubs.items() if m == stub_model)
    return {
        "stub_rss": rss,
        "shm_size": shm.size,
        "shm_allocated": shm.allocated,
        "shm_segments": shm.segments,
    }


class Runner:
    def __init__(self, args: argparse.Namespace, loadgen: Path, tmp: Path) -> None:
        self.args, self.loadgen, self.tmp = args, loadgen, tmp
        self.servers: dict[str, BenchServer] = {}
        self.load_errors: dict[str, dict[str, str | None]] = {}
        self.models: dict[str, list[str]] = {}
        self.notes: list[str] = []

    def start_servers(self, dirs: dict[str, Path]) -> dict[str, str]:
        """Start one server per backend (in parallel); kind -> error for those that failed."""
        for kind, bdir in dirs.items():
            repo = self.tmp / f"repo-{kind}"
            self.models[kind] = repository.write_repository(repo, native=kind == "native")
            self.servers[kind] = BenchServer(kind, repo, bdir, strict=False)
        failed: dict[str, str] = {}

        def start(kind: str) -> None:
            try:
                self.servers[kind].start(timeout=120)
                self.load_errors[kind] = self.servers[kind].wait_models(self.models[kind], 300)
            except ServerFailed as exc:
                failed[kind] = str(exc).splitlines()[0]

        with ThreadPoolExecutor(len(dirs)) as pool:
            list(pool.map(start, dirs))
        for kind in failed:
            self.servers.pop(kind).stop()
        return failed

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    def _unavailable(self, kind: str, workload: Workload, port: int) -> str | None:
        """Why this backend cannot run this workload, or None."""
        if not workload.native and kind == "native":
            return "no native equivalent"
        missing = [m for m in workload.stub_models if m not in self.models[kind]]
        problem = next(
            (
                self.load_errors[kind].get(m)
                for m in workload.stub_models
                if self.load_errors[kind].get(m)
            ),
            None,
        ) or (missing and "not in repository")
        problem = problem or send_once(port, workload.payload)
        if problem:
            self.notes.append(f"{workload.key} on {kind}: {str(problem).splitlines()[0][:300]}")
            return "feature missing" if kind == "ours" else "failed"
        return None

    def run_workload(self, workload: Workload) -> dict[str, Any]:
        request_file = self.tmp / f"{workload.key}.http"
        request_file.write_bytes(workload.payload.raw())
        entry: dict[str, Any] = {"title": workload.title}
        active = []
        for kind, server in self.servers.items():
            reason = self._unavailable(kind, workload, server.port)
            if reason:
                entry[kind] = {"na": reason}
            else:
                active.append(kind)
        all_models = {k: self.models[k] for k in self.servers}
        window = self.args.window * workload.window_scale
        for kind in list(active):  # warm-up: unmeasured
            try:
                run_window(
                    self.servers[kind],
                    workload,
                    self.loadgen,
                    request_file,
                    self.args.warmup * workload.window_scale,
                    1,
                    all_models[kind],
                )
            except WindowFailed as exc:
                entry[kind] = {"na": "failed"}
                self.notes.append(f"{workload.key} on {kind}: warm-up: {exc}")
                active.remove(kind)
        sums = {k: Summary() for k in active}
        for rnd in range(self.args.rounds):
            order = active[rnd % len(active) :] + active[: rnd % len(active)] if active else []
            for kind in order:
                if kind not in sums:
                    continue
                try:
                    sums[kind].add(
                        run_window(
                            self.servers[kind],
                            workload,
                            self.loadgen,
                            request_file,
                            window,
                            1,
                            all_models[kind],
                        )
                    )
                except WindowFailed as exc:
                    entry[kind] = {"na": "failed"}
                    self.notes.append(f"{workload.key} on {kind}: {exc}")
                    del sums[kind]
        for kind, total in sums.items():
            entry[kind] = total.to_json()
            if total.errors:
                self.notes.append(
                    f"{workload.key} on {kind}: {total.errors} error responses: {total.first_error}"
                )
        return entry


def run(args: argparse.Namespace) -> dict[str, Any]:
    loadgen, native_dir = build.ensure_built()
    found = backend_dirs(args.backends.split(","), native_dir)
    dirs = {k: v for k, v in found.items() if isinstance(v, Path)}
    results: dict[str, Any] = {
        "meta": {
            "machine": machine(),
            "revision": revision(),
            "command": shlex.join(
                [Path(sys.executable).name, "-m", "benchmarks.run", *sys.argv[1:]]
            ),
            "settings": f"window {args.window} s × {args.rounds} rounds, warm-up {args.warmup} s, "
            f"load-time starts {args.load_reps} per backend",
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_average_at_start": os.getloadavg()[0],
            "cpus": os.cpu_count(),
        },
        "workloads": {},
        "memory": {},
        "notes": [],
    }
    for kind, reason in found.items():
        if not isinstance(reason, Path):
            results["notes"].append(f"{kind}: {reason}")
    with tempfile.TemporaryDirectory(prefix="pybackend-bench-") as tmp_name:
        tmp = Path(tmp_name)
        results["load_time"] = measure_load_times(dirs, args.load_reps, tmp)
        runner = Runner(args, loadgen, tmp)
        try:
            for kind, err in runner.start_servers(dirs).items():
                results["notes"].append(f"{kind} server failed to start: {err}")
            for kind, server in runner.servers.items():
                results["memory"][kind] = {
                    "idle": memory_snapshot(server, runner.models[kind], "identity")
                }
            for workload in select(args.workloads):
                entry = runner.run_workload(workload)
                for kind in BACKENDS:
                    if kind in found and kind not in entry:
                        entry[kind] = {
                            "na": "not built" if found[kind] == "not built" else "unavailable"
                        }
                results["workloads"][workload.key] = entry
                if workload.key == BURST_WORKLOAD:
                    time.sleep(0.5 if args.quick else 2.0)  # let the backends give memory back
                    for kind, server in runner.servers.items():
                        results["memory"][kind]["post_burst"] = memory_snapshot(
                            server, runner.models[kind], "identity"
                        )
        finally:
            runner.stop()
        results["notes"] += runner.notes
    speedup, note = micro.decode_speedup(quick=args.quick)
    results["decode_speedup"] = speedup
    results["notes"].append(f"UV-11 decode micro-benchmark: {note}")
    _, note = micro.decode_speedup(quick=args.quick, mixed=True)
    results["notes"].append(f"UV-11 decode micro-benchmark: {note}")
    results["notes"].append(
        f"BYTES encode micro-benchmark: {micro.encode_speedup(quick=args.quick)}"
    )
    results["meta"]["load_average_at_end"] = os.getloadavg()[0]
    results["targets"] = report.targets(results)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    text = report.render(results)
    if results["notes"]:
        text += "\nNotes:\n" + "\n".join(f"- {n}" for n in results["notes"]) + "\n"
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
