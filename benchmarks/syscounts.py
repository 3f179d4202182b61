"""Load-independent counts per request: syscalls by kind, context switches per thread.

Timings on a shared 2-vCPU machine are noisy; what a request costs in syscalls and
wake-ups is not. For one model (``bls``, ``identity``) and one backend kind, this sends
N sequential requests (concurrency 1) and reports, per request:

* the voluntary/involuntary context switches of every thread of tritonserver and of each
  stub (``/proc/<pid>/task/<tid>/status`` deltas, a pass without strace, which adds its own);
* the syscalls by name of tritonserver and of each stub (``strace -f -c``, a second pass);
* with ``--pycalls``, the Python function calls of each stub's main thread (cProfile, started
  by a ``sitecustomize`` on the stubs' PYTHONPATH; its times are wall times and inflated by
  the profiler, the call counts are exact), the top ones by count.

    python -m benchmarks.syscounts --backend ours --model bls -n 2000

The client is a kept-alive HTTP connection in this process, so tritonserver's counts include
its HTTP frontend's work (the same for both backends).
"""

from __future__ import annotations

import argparse
import http.client
import json
import marshal
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import repository
from benchmarks.run import backend_dirs
from benchmarks.server import BenchServer

# Profiles the main thread of every Python process it is imported into (the stubs only: the
# server's environment is the only one that carries its directory) and writes the counts so
# far every half second.
SITECUSTOMIZE = """
import cProfile, marshal, os, threading, time
_pr = cProfile.Profile()
_pr.enable()
def _dump():
    while True:
        time.sleep(0.5)
        _pr.snapshot_stats()
        path = os.path.join(os.environ["PYBACKEND_SYSCOUNTS_DIR"], str(os.getpid()))
        with open(path + ".tmp", "wb") as f:
            marshal.dump(_pr.stats, f)
        os.replace(path + ".tmp", path + ".stats")
threading.Thread(target=_dump, daemon=True).start()
"""

BODY = json.dumps(
    {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}
).encode()


def _send(conn: http.client.HTTPConnection, model: str, n: int) -> None:
    for _ in range(n):
        conn.request("POST", f"/v2/models/{model}/infer", body=BODY)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{model}: HTTP {resp.status}: {data[:300]!r}")


def _threads(pid: int) -> dict[int, tuple[str, int, int]]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            text = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue
        f = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        try:
            run_ns = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            run_ns = 0
        out[int(tid)] = (
            f["Name"].strip(),
            int(f["voluntary_ctxt_switches"]),
            int(f["nonvoluntary_ctxt_switches"]),
            run_ns,
        )
    return out


def _switches(pids: dict[str, int], send: "callable[[], None]", n: int) -> None:  # type: ignore[valid-type]
    before = {name: _threads(pid) for name, pid in pids.items()}
    send()
    after = {name: _threads(pid) for name, pid in pids.items()}
    for name in pids:
        vol = inv = cpu = 0.0
        rows = []
        for tid, (tname, v1, i1, r1) in after[name].items():
            _, v0, i0, r0 = before[name].get(tid, (tname, 0, 0, 0))
            dv, di, dr = (v1 - v0) / n, (i1 - i0) / n, (r1 - r0) / n / 1000
            vol, inv, cpu = vol + dv, inv + di, cpu + dr
            if dv + di >= 0.05:
                rows.append(
                    f"    {tname:<18} tid {tid}: vol {dv:.2f} invol {di:.2f} cpu {dr:.1f} us"
                )
        print(f"  {name}: voluntary {vol:.2f}, involuntary {inv:.2f}, cpu {cpu:.1f} us per request")
        print("\n".join(rows))


def _strace(pids: dict[str, int], send: "callable[[], None]", n: int, full: bool) -> None:  # type: ignore[valid-type]
    tmp = Path(tempfile.mkdtemp(prefix="syscounts-"))
    procs = {}
    for name, pid in pids.items():
        args = (
            ["-f", "-tt", "-T", "-e", "trace=all"]
            if full
            else ["-f", "-c", "-U", "name,calls,errors"]
        )
        procs[name] = subprocess.Popen(
            ["strace", *args, "-o", str(tmp / name), "-p", str(pid)],
            stderr=subprocess.DEVNULL,
        )
    time.sleep(1.0)  # attached to every thread
    send()
    time.sleep(0.3)
    for p in procs.values():
        p.send_signal(signal.SIGINT)
    for p in procs.values():
        p.wait(30)
    for name in pids:
        if full:
            print(f"  {name}: full trace in {tmp / name}")
            continue
        print(f"  {name}: syscalls per request")
        for line in (tmp / name).read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit() and parts[0] not in ("syscall", "total"):
                errs = f" ({int(parts[2]) / n:.2f} errors)" if len(parts) > 2 else ""
                print(f"    {parts[0]:<18} {int(parts[1]) / n:6.2f}{errs}")
            elif parts[:1] == ["total"]:
                print(f"    {'total':<18} {int(parts[1]) / n:6.2f}")


def _pycalls(pids: dict[str, int], where: Path, send: "callable[[], None]", n: int) -> None:  # type: ignore[valid-type]
    def load() -> dict[str, dict]:
        time.sleep(1.2)  # two dumps later
        return {
            name: marshal.loads((where / f"{pid}.stats").read_bytes())
            for name, pid in pids.items()
            if name != "tritonserver"
        }

    before = load()
    send()
    after = load()
    for name, stats in after.items():
        rows = []
        for key, v in stats.items():
            calls = v[1] - before[name].get(key, (0, 0))[1]
            if calls:
                rows.append((calls / n, f"{Path(key[0]).name}:{key[1]}({key[2]})"))
        print(f"  {name}: {sum(c for c, _ in rows):.1f} Python function calls per request")
        for calls, where_ in sorted(rows, reverse=True)[:12]:
            print(f"    {calls:6.2f}  {where_}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="ours", choices=["ours", "original"])
    ap.add_argument("--model", default="bls")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--full", type=int, default=0, help="also a full strace of this many requests")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument(
        "--pycalls",
        action="store_true",
        help="count the stubs' Python calls (the profiler stays on: read CPU from a run without)",
    )
    args = ap.parse_args()
    bdir = backend_dirs([args.backend], Path("/nonexistent"))[args.backend]
    if isinstance(bdir, str):
        raise SystemExit(f"{args.backend}: {bdir}")
    work = Path(tempfile.mkdtemp(prefix="syscounts-repo-"))
    repo = work / "repo"
    models = repository.write_repository(
        repo, native=False, names=("bls", "bls_target", "identity")
    )
    env = {}
    if args.pycalls:
        (work / "site").mkdir()
        (work / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = {"PYTHONPATH": str(work / "site"), "PYBACKEND_SYSCOUNTS_DIR": str(work / "site")}
    with BenchServer(args.backend, repo, bdir, strict=False, env=env) as server:
        server.start()
        bad = {k: v for k, v in server.wait_models(models, 120).items() if v}
        if bad:
            raise SystemExit(f"models not ready: {bad}\n{server.log_tail()}")
        pids = {"tritonserver": server.pid}
        for pid, model in server.stubs(models).items():
            if model in ("bls", "bls_target", "identity"):
                pids[f"stub[{model}]"] = pid
        for name, pid in pids.items():
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            path = [e.decode() for e in env if e.startswith(b"PYTHONPATH=")]
            print(f"  {name} pid {pid} {path[0] if path else ''}")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        _send(conn, args.model, 300)  # warm up
        n = args.n
        print(f"{args.backend} {args.model}, {n} requests at concurrency 1")
        _switches(pids, lambda: _send(conn, args.model, n), n)
        if not args.no_strace:
            _strace(pids, lambda: _send(conn, args.model, n), n, False)
        if args.pycalls:
            _pycalls(pids, work / "site", lambda: _send(conn, args.model, n), n)
        if args.full:
            _strace(pids, lambda: _send(conn, args.model, args.full), args.full, True)
        conn.close()


if __name__ == "__main__":
    main()
