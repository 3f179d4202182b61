"""The shared_weights example (examples/model_repository/shared_weights) through a real
tritonserver: exact projections, both instances serving, and where they live. Under ours
(PYBACKEND_INSTANCE_PROCESS "shared") both instances answer from one process, the model's
only stub process, with one copy of the weights; under NVIDIA's original
(PYBACKEND_TEST_BACKEND=original), which ignores the parameter, each from a process of its
own, with the same answers. Each instance's row counter is on the metrics endpoint.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from integration_support.clients import InferClient
from pybackend.server import TritonServer
from pybackend.server.processes import descendants

MODEL = "shared_weights"
INSTANCES = {f"{MODEL}_0_0", f"{MODEL}_0_1"}
OUTPUTS = ["PROJECTED", "INSTANCE", "PID"]
WIDTH = 2048
METRIC = "shared_weights_rows_total"
#: Requests sent at once per round: more than one instance can take while the other is busy.
AT_ONCE = 16
#: Rounds sent until both instances answered (a bound, not a measurement).
ROUNDS = 50


@pytest.fixture(scope="module")
def weights() -> np.ndarray:
    """The model's weights, made here as its docstring says: eighths from a frozen stream."""
    return (np.random.RandomState(2048).randint(-8, 9, size=(WIDTH, WIDTH)) / 8).astype(np.float32)


def features(seed: int, rows: int) -> np.ndarray:
    """Quarters up to 16: every sum of products with the weights is exact in float32."""
    grid = np.random.default_rng(seed).integers(-64, 65, size=(rows, WIDTH))
    return (grid / 4).astype(np.float32)


def expected(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    # In float64, then rounded: the same float32 values, whatever the BLAS's order of sums.
    return (rows.astype(np.float64) @ weights.astype(np.float64)).astype(np.float32)


def check_answer(out: dict[str, np.ndarray], rows: np.ndarray, weights: np.ndarray) -> str:
    """Asserts one request's outputs; returns the instance that served it."""
    assert out["PROJECTED"].dtype == np.float32
    np.testing.assert_array_equal(out["PROJECTED"], expected(rows, weights))
    # One request is served by one execute of one instance: every row names the same.
    assert out["INSTANCE"].shape == out["PID"].shape == (len(rows), 1)
    assert out["PID"].dtype == np.int64
    assert len(set(out["INSTANCE"].ravel())) == len(set(out["PID"].ravel())) == 1
    return out["INSTANCE"][0, 0].decode()


# ---------------------------------------------------------------------------- answers
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_projection_is_exact(
    client: InferClient, examples_server: TritonServer, weights: np.ndarray, rows: int
) -> None:
    given = features(rows, rows)
    out = client.infer(MODEL, {"FEATURES": given}, OUTPUTS)
    assert check_answer(out, given, weights) in INSTANCES
    assert int(out["PID"][0, 0]) in descendants(examples_server.pid)  # one of its stubs


# ---------------------------------------------------------------------------- both instances
@dataclass
class Served:
    pids: dict[str, set[int]] = field(default_factory=dict)  # instance -> pids it reported
    rows: Counter = field(default_factory=Counter)  # instance -> rows it served
    metrics_before: dict[str, float] = field(default_factory=dict)  # instance -> counter
    metrics_after: dict[str, float] = field(default_factory=dict)


def row_counters(server: TritonServer) -> dict[str, float]:
    """instance_name -> value of the model's row counter on the metrics endpoint."""
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith(METRIC + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.rindex("}")]))
            assert labels["model"] == MODEL, line
            found[labels["instance_name"]] = float(line.rsplit(" ", 1)[1])
    return found


@pytest.fixture(scope="module")
def served(examples_server: TritonServer, weights: np.ndarray) -> Served:
    """Rounds of AT_ONCE requests (8 rows each: a full batch, so the dynamic batcher sends
    each on its own) until both instances have answered, every answer checked."""
    grpc = InferClient(
        "grpc", grpcclient, grpcclient.InferenceServerClient(examples_server.grpc_url)
    )
    result = Served(metrics_before=row_counters(examples_server))
    lock = threading.Lock()

    def one(seed: int, barrier: threading.Barrier) -> None:
        given = features(seed, 8)
        barrier.wait(timeout=30)  # the requests reach the server together
        out = grpc.infer(MODEL, {"FEATURES": given}, OUTPUTS)
        name = check_answer(out, given, weights)
        with lock:
            result.pids.setdefault(name, set()).add(int(out["PID"][0, 0]))
            result.rows[name] += len(given)

    try:
        with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
            for round_ in range(ROUNDS):
                if set(result.pids) == INSTANCES:
                    break
                barrier = threading.Barrier(AT_ONCE)
                seeds = range(round_ * AT_ONCE, (round_ + 1) * AT_ONCE)
                for done in [pool.submit(one, seed, barrier) for seed in seeds]:
                    done.result()
    finally:
        grpc.client.close()
    result.metrics_after = row_counters(examples_server)
    return result


def test_both_instances_serve(served: Served) -> None:
    assert set(served.pids) == INSTANCES, f"after {ROUNDS} rounds: {served.pids}"
    # An instance lives in one process (no restart happened).
    assert all(len(pids) == 1 for pids in served.pids.values()), served.pids


def test_where_the_instances_live(
    served: Served, examples_server: TritonServer, backend_kind: str
) -> None:
    (pid_0,), (pid_1,) = (served.pids[name] for name in sorted(INSTANCES))
    stubs = model_processes(examples_server, backend_kind)
    if backend_kind == "ours":
        # One process for both instances, and it is the only one the model has: the host
        # that PYBACKEND_INSTANCE_PROCESS "shared" starts.
        assert pid_0 == pid_1
        assert list(stubs) == [pid_0], stubs
        assert "pybackend.stub.host" in stubs[pid_0]
    else:
        # The original ignores the parameter: a stub process per instance.
        assert pid_0 != pid_1
        assert set(stubs) == {pid_0, pid_1}, stubs


def model_processes(server: TritonServer, backend_kind: str) -> dict[int, str]:
    """pid -> command line of the server's stub processes that serve this model: ours name
    it (`pybackend.stub.host --model M`, or `pybackend.stub --instance M_0_0`), the
    original's are given the path of its model.py."""
    found = {}
    for pid in descendants(server.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue  # gone meanwhile
        if backend_kind == "ours":
            mine = any(a.startswith("pybackend.stub") for a in argv) and any(
                a == MODEL or a.startswith(f"{MODEL}_") for a in argv
            )
        else:
            mine = any(a.endswith(f"/{MODEL}/1/model.py") for a in argv)
        if mine:
            found[pid] = " ".join(argv)
    return found


def test_each_instance_counts_its_rows_on_the_metrics_endpoint(served: Served) -> None:
    # Both series exist from initialize on, and each grew by the rows its instance served.
    assert set(served.metrics_before) == set(served.metrics_after) == INSTANCES
    grown = {name: served.metrics_after[name] - served.metrics_before[name] for name in INSTANCES}
    assert grown == {name: float(served.rows[name]) for name in INSTANCES}


# ---------------------------------------------------------------------------- the log
LOG_LINE = re.compile(rf"({MODEL}_0_[01]): weights of 16 MiB at (0x[0-9a-f]+) in process (\d+)")


def initialize_lines(server: TritonServer) -> dict[str, tuple[str, int]]:
    """instance -> (address of its weights, pid), from the lines initialize logged. Bounded
    wait: under NVIDIA's backend a Logger line of initialize may reach the log a moment
    after the model reads ready (ours logs them before the load completes)."""
    deadline = time.monotonic() + 30
    while True:
        found = {m[1]: (m[2], int(m[3])) for m in LOG_LINE.finditer(server.log_text())}
        if set(found) == INSTANCES or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_initialize_logs_where_the_weights_are(
    served: Served, examples_server: TritonServer, backend_kind: str
) -> None:
    found = initialize_lines(examples_server)
    assert set(found) == INSTANCES, found
    # The pids logged at initialize are those that served.
    assert {name: {pid} for name, (_, pid) in found.items()} == served.pids
    if backend_kind == "ours":
        # One process, and pb_utils.shared gave both instances the same array.
        assert len({address for address, _ in found.values()}) == 1, found
