"""Instructions per request in the backend's execute, counted, not timed: tritonserver runs
under ``valgrind --tool=callgrind`` with collection on only inside
``TRITONBACKEND_ModelInstanceExecute`` (Triton's instance thread in the backend, the stub's
turn excluded: waiting costs no instructions), serving the tiny identity (FP32 [1, 16], binary
HTTP) at concurrency 1, once per backend:

    python -m benchmarks.instructions [--backends ours,original] [--requests 1000]

Counts do not move with the machine's load or speed (this VM's timings do, by 2x within a
session), so a change of the backend's per-request work shows here as a number, however small.
The table splits the count into ``TRITONBACKEND_ResponseSend`` (Triton's frontend writing the
response, called from the backend's thread: the same for both backends) and the rest (the
backend's own work and the other Triton calls it makes).
"""

from __future__ import annotations

import argparse
import http.client
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List

from benchmarks import payloads, repository
from benchmarks.server import BenchServer
from pybackend.server import locate

EXECUTE = "TRITONBACKEND_ModelInstanceExecute"
RESPONSE_SEND = "TRITONBACKEND_ResponseSend"
WARMUP = 20


def _callgrind(out: Path) -> list[str]:
    """The command tritonserver runs under: callgrind, collecting inside execute only."""
    return [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        f"--toggle-collect={EXECUTE}",
        "--separate-threads=no",
    ]


def _send(port: int, count: int) -> None:
    """``count`` tiny identity requests on one kept-alive connection, each answer checked
    (benchmarks.payloads: the request and its check that benchmarks.run sends)."""
    payload = payloads.identity("identity", (1, 16))
    path, headers, body = payload.parts()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        for _ in range(count):
            conn.request("POST", path, body=body, headers=headers)
            reply = conn.getresponse()
            wrong = payload.check(reply.status, reply.headers, reply.read())
            if wrong is not None:
                raise RuntimeError(f"identity answered wrongly: {wrong}")
    finally:
        conn.close()


def inclusive(annotated: str, symbol: str) -> int:
    """The inclusive count of the first line of ``callgrind_annotate --inclusive=yes`` whose
    function is ``symbol`` (0 when the run never reached it)."""
    for line in annotated.splitlines():
        m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+\S*?:(\S+?)(?:\(| \[)", line)
        if m and m.group(2) == symbol:
            return int(m.group(1).replace(",", ""))
    return 0


def measure(kind: str, requests: int) -> Dict[str, float]:
    """Instructions per request inside execute for one backend ("ours" or "original")."""
    with tempfile.TemporaryDirectory(prefix=f"instructions-{kind}-") as tmp:
        folder = Path(tmp)
        out = folder / "callgrind.out"
        repo = folder / "repo"
        repository.write_repository(repo, native=False, names=("identity",))
        backend_dir = locate.our_backend_dir() if kind == "ours" else locate.original_backend_dir()
        server = BenchServer(kind, repo, backend_dir, strict=True, prefix=_callgrind(out))
        server.start(timeout=600)
        try:
            _send(server.port, WARMUP + requests)
        finally:
            server.stop()  # callgrind writes its file when the server exits
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", str(out)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    n = WARMUP + requests
    total = inclusive(annotated, EXECUTE) / n
    send = inclusive(annotated, RESPONSE_SEND) / n
    return {"execute": total, "response_send": send, "rest": total - send}


def table(results: Dict[str, Dict[str, float]]) -> str:
    lines = [
        f"| backend | instructions/request in execute | of which {RESPONSE_SEND} | the rest |",
        "|---|--:|--:|--:|",
    ]
    for kind, r in results.items():
        lines.append(
            f"| {kind} | {r['execute']:,.0f} | {r['response_send']:,.0f} | {r['rest']:,.0f} |"
        )
    if {"ours", "original"} <= results.keys():
        a, b = results["ours"], results["original"]
        lines.append(
            f"| ours/original | {a['execute'] / b['execute']:.2f} | "
            f"{a['response_send'] / b['response_send']:.2f} | {a['rest'] / b['rest']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: List[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--backends", default="ours,original")
    p.add_argument(
        "--requests", type=int, default=1000, help="counted with 20 sent first (all averaged)"
    )
    args = p.parse_args(argv)
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"benchmarks.instructions needs {tool} (Debian: apt-get install valgrind)"
            )
    results = {kind: measure(kind, args.requests) for kind in args.backends.split(",")}
    print(table(results))


if __name__ == "__main__":
    main()
