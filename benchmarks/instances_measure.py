"""What the instances benchmark measures (issue 29): the PSS of the processes under a
tritonserver, the time of a load request until the model is READY, and the throughput of
the matmul models at a fixed concurrency, every answer checked.

The client is plain Python threads on keep-alive HTTP connections (KServe v2, JSON): each
request is 4-8 bytes of indices and its answer 256 integers, so the client costs little
next to the model's matmuls, and checking an answer is an arange (instances_*.py says why).
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.server import BenchServer, ServerFailed
from pybackend.server.processes import descendants, wait_gone

N = 256


def pss_bytes(pid: int) -> int:
    """Proportional set size (smaps_rollup): shared pages count 1/n in each of n sharers."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_memory(server: BenchServer) -> dict[str, int]:
    """PSS of every process under the server (its stubs, all descendants), and its own."""
    tree = descendants(server.pid)
    return {
        "processes": len(tree),
        "stubs_pss": sum(pss_bytes(p) for p in tree),
        "server_pss": pss_bytes(server.pid),
    }


def _control(server: BenchServer, path: str, timeout: float) -> tuple[int, bytes]:
    # A connection of its own: a load of four heavy instances can outlast the server
    # object's 60 s control timeout on a busy machine.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _ready(server: BenchServer, name: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("GET", f"/v2/models/{name}/ready")
        return conn.getresponse().status == 200
    finally:
        conn.close()


def load_seconds(server: BenchServer, name: str, timeout: float = 600.0) -> float:
    """Send the repository API's load request (explicit model control) and return the
    seconds until the model reports READY."""
    t0 = time.perf_counter()
    status, body = _control(server, f"/v2/repository/models/{name}/load", timeout)
    if status != 200:
        raise ServerFailed(f"load of {name} failed ({status}): {body[:300]!r}")
    while not _ready(server, name):
        if time.perf_counter() - t0 > timeout:
            raise ServerFailed(f"{name} not READY {timeout} s after its load request")
        time.sleep(0.002)
    return time.perf_counter() - t0


def unload(server: BenchServer, name: str, timeout: float = 120.0) -> None:
    """Unload and wait until every process the model had is gone."""
    tree = descendants(server.pid)
    status, body = _control(server, f"/v2/repository/models/{name}/unload", timeout)
    if status != 200:
        raise ServerFailed(f"unload of {name} failed ({status}): {body[:300]!r}")
    if wait_gone(tree, timeout):
        raise ServerFailed(f"{name}: processes still there {timeout} s after the unload")


@dataclass
class Throughput:
    completed: int = 0
    elapsed_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    def add(self, other: Throughput) -> None:
        self.completed += other.completed
        self.elapsed_s += other.elapsed_s
        self.latencies_s += other.latencies_s
        self.wrong += other.wrong

    @property
    def rate(self) -> float:
        return self.completed / self.elapsed_s if self.elapsed_s else 0.0

    def p50_ms(self) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[len(ordered) // 2] * 1e3 if ordered else 0.0


class _Client(threading.Thread):
    """One closed-loop connection: request, check the answer, repeat until ``stop_at``."""

    def __init__(
        self, port: int, name: str, matmuls: int, slabs: int, stop_at: float, seed: int
    ) -> None:
        super().__init__(daemon=True)
        self.port, self.name, self.matmuls, self.slabs = port, name, matmuls, slabs
        self.stop_at, self.rng = stop_at, random.Random(seed)
        self.result = Throughput()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        path = f"/v2/models/{self.name}/infer"
        try:
            while time.perf_counter() < self.stop_at:
                idx = [self.rng.randrange(self.slabs) for _ in range(self.matmuls + 1)]
                body = json.dumps(
                    {
                        "inputs": [
                            {"name": "IDX", "shape": [len(idx)], "datatype": "INT32", "data": idx}
                        ]
                    }
                ).encode()
                t0 = time.perf_counter()
                conn.request("POST", path, body=body)
                resp = conn.getresponse()
                raw = resp.read()
                self.result.latencies_s.append(time.perf_counter() - t0)
                self.result.completed += 1
                self._check(resp.status, raw, sum(idx))
        except (OSError, http.client.HTTPException) as exc:
            self.result.wrong.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def _check(self, status: int, raw: bytes, shift: int) -> None:
        if status != 200:
            self.result.wrong.append(f"HTTP {status}: {raw[:200]!r}")
            return
        got = json.loads(raw)["outputs"][0]["data"]
        if got != [(i + shift) % N for i in range(N)]:
            self.result.wrong.append(f"wrong PERM for shift {shift}: {got[:8]}...")


def run_window(
    server: BenchServer,
    name: str,
    *,
    seconds: float,
    concurrency: int,
    matmuls: int,
    slabs: int,
    seed: int,
) -> Throughput:
    """``concurrency`` clients for ``seconds``; every answer is checked."""
    t0 = time.perf_counter()
    clients = [
        _Client(server.port, name, matmuls, slabs, t0 + seconds, seed * 1000 + i)
        for i in range(concurrency)
    ]
    for client in clients:
        client.start()
    for client in clients:
        client.join(seconds + 180)
    total = Throughput(elapsed_s=time.perf_counter() - t0)
    for client in clients:
        total.completed += client.result.completed
        total.latencies_s += client.result.latencies_s
        total.wrong += client.result.wrong
    return total
