"""Where the time goes: per-request CPU by process, by library (perf) and by stub function (py-spy).

    python -m benchmarks.breakdown                       # tiny identity, ours and native
    python -m benchmarks.breakdown --workload 64m_c1 --backends ours,original,native

For each backend it starts a server with only the workload's models and runs three phases
of load (each `--seconds` long): a clean one (CPU µs per request of the server, the stubs
and the client, and Triton's backend time), one under `perf record` (CPU split by process
and shared library: kernel, libtritonserver, our libtriton_python.so, libpython, numpy...),
and, for Python backends, one under `py-spy record --gil --nonblocking` on the stub (only
the thread holding the GIL is sampled, so blocking waits drop out; the split is scaled to
the stub's CPU per request from the clean phase). perf and py-spy are optional: a phase
whose tool is missing is skipped (`pip install py-spy`; perf from the distribution).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks import build, procinfo, repository
from benchmarks.server import BenchServer
from benchmarks.workloads import Workload, select
from pybackend.server import locate


def _loadgen(server: BenchServer, workload: Workload, request: Path, seconds: float) -> dict:
    cmd = [str(build.LOADGEN), str(server.port), str(request), str(workload.concurrency)]
    cmd += [f"{seconds:.2f}", "1"] + (["sse"] if workload.payload.sse else [])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, check=True)
    return json.loads(done.stdout)


def clean_phase(
    server: BenchServer, workload: Workload, request: Path, stubs: list[int], seconds: float
) -> dict[str, float]:
    pids = [server.pid, *stubs]
    before, stats0 = {p: procinfo.cpu_seconds(p) for p in pids}, server.stats(workload.model)
    out = _loadgen(server, workload, request, seconds)
    after, stats1 = {p: procinfo.cpu_seconds(p) for p in pids}, server.stats(workload.model)
    n = max(out["completed"], 1)
    count = max(stats1["count"] - stats0["count"], 1)
    return {
        "req_per_s": out["completed"] / out["elapsed_s"],
        "backend_us": (stats1["backend_ns"] - stats0["backend_ns"]) / count / 1000,
        "server_us": (after[server.pid] - before[server.pid]) / n * 1e6,
        "stub_us": sum(after[p] - before[p] for p in stubs) / n * 1e6,
        "client_us": (out["cpu_user_s"] + out["cpu_sys_s"]) / n * 1e6,
    }


def perf_phase(
    server: BenchServer,
    workload: Workload,
    request: Path,
    stubs: list[int],
    seconds: float,
    tmp: Path,
) -> tuple[list[list[str]], list[list[str]]]:
    """Sampled CPU of the server and its stubs: by (process, library) and top symbols."""
    data = tmp / "perf.data"
    pids = ",".join(str(p) for p in [server.pid, *stubs])
    cmd = ["perf", "record", "-F", "999", "-o", str(data), "-p", pids, "--", "sleep", str(seconds)]
    perf = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.2)
    _loadgen(server, workload, request, seconds - 0.5)
    perf.wait()
    return _perf_report(data, "comm,dso", 1.0), _perf_report(data, "comm,dso,sym", 2.0)


def _perf_report(data: Path, sort: str, min_pct: float) -> list[list[str]]:
    """perf report rows [percent, field...] at or above min_pct."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", sort, "--stdio"],
        capture_output=True,
        text=True,
    ).stdout
    rows = []
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].endswith("%") and not line.startswith("#"):
            if float(parts[0][:-1]) >= min_pct:
                # comm, dso, then "[k] symbol" or "[.] symbol"
                rows.append([parts[0], parts[1], parts[2], " ".join(parts[3:])])
    return rows


def spy_phase(
    server: BenchServer,
    workload: Workload,
    request: Path,
    stub: int,
    seconds: float,
    spy: str,
    tmp: Path,
) -> Counter[str]:
    """Samples per Python function (inclusive) of the stub thread holding the GIL."""
    raw = tmp / "spy.txt"
    cmd = [
        spy,
        "record",
        "-p",
        str(stub),
        "-d",
        str(int(seconds)),
        "-r",
        "500",
        "--gil",
        "--nonblocking",
        "--format",
        "raw",
        "-o",
        str(raw),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    _loadgen(server, workload, request, seconds - 1)
    proc.wait()
    inclusive: Counter[str] = Counter()
    if not raw.exists():
        return inclusive
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        names = {_frame_name(f) for f in stack.split(";")} - _BORING
        for name in names:
            inclusive[name] += int(count)
        inclusive["<all>"] += int(count)
    return inclusive


# Frames every sample has (interpreter start-up) or native frames py-spy cannot name.
_BORING = {
    "",
    "_run_module_as_main (<frozen runpy>)",
    "_run_code (<frozen runpy>)",
    "<module> (__main__.py)",
    "main (__main__.py)",
    "run (main.py)",
}


def _frame_name(frame: str) -> str:
    """'func (path/file.py:12)' -> 'func (file.py)'."""
    func, _, where = frame.partition(" (")
    return f"{func} ({where.split(':')[0].rsplit('/', 1)[-1]})" if where else func


def profile_backend(
    kind: str, workload: Workload, seconds: float, tmp: Path, spy: str | None
) -> list[str]:
    native = kind == "native"
    backend_dir = {"native": build.NATIVE_BACKENDS, "ours": locate.our_backend_dir()}.get(kind)
    backend_dir = backend_dir or locate.original_backend_dir()
    repo = tmp / f"repo-{kind}"
    repository.write_repository(repo, native=native, names=workload.stub_models)
    request = tmp / "request.http"
    request.write_bytes(workload.payload.raw())
    lines = [f"#### {kind}: {workload.title}"]
    with BenchServer(kind, repo, backend_dir) as server:
        server.start()
        stubs = [p for p, m in server.stubs(list(workload.stub_models)).items() if m]
        _loadgen(server, workload, request, 1.0)  # warm-up
        clean = clean_phase(server, workload, request, stubs, seconds)
        lines.append(
            f"{clean['req_per_s']:,.0f} req/s; per request: "
            f"backend time {clean['backend_us']:.1f} µs, "
            f"CPU server {clean['server_us']:.1f} µs, stubs {clean['stub_us']:.1f} µs, "
            f"client {clean['client_us']:.1f} µs"
        )
        if shutil.which("perf"):
            by_dso, by_sym = perf_phase(server, workload, request, stubs, seconds, tmp)
            lines += ["", "| CPU share (perf) | process | library |", "|--:|---|---|"]
            lines += [f"| {r[0]} | {r[1]} | {r[2]} |" for r in by_dso]
            lines += ["", "| CPU share (perf) | process | library | symbol |", "|--:|---|---|---|"]
            lines += [f"| {r[0]} | {r[1]} | {r[2]} | `{r[3]}` |" for r in by_sym]
        if spy and stubs:
            samples = spy_phase(server, workload, request, stubs[0], seconds, spy, tmp)
            total = samples.pop("<all>", 0)
            if total:
                lines += [
                    "",
                    "| stub function (inclusive, GIL held) | share | ≈ µs/req |",
                    "|---|--:|--:|",
                ]
                for name, count in samples.most_common(25):
                    share = count / total
                    lines.append(
                        f"| {name} | {100 * share:.0f}% | {share * clean['stub_us']:.1f} |"
                    )
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.breakdown",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workload", default="tiny_c1")
    p.add_argument("--backends", default="ours,native")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy executable")
    args = p.parse_args(argv)
    if args.py_spy and not shutil.which(args.py_spy):
        # Found out before minutes of load, not as a traceback after the clean phase.
        p.error(f"--py-spy {args.py_spy}: no such executable (pip install py-spy)")
    build.ensure_built()
    (workload,) = select([args.workload])
    with tempfile.TemporaryDirectory(prefix="pybackend-breakdown-") as tmp:
        for kind in args.backends.split(","):
            print("\n".join(profile_backend(kind, workload, args.seconds, Path(tmp), args.py_spy)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
