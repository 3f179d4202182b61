"""Helpers for tests/instances: model configs per PYBACKEND_INSTANCE_PROCESS mode, calls
to the `ident` model, and the stub processes under a server."""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from pybackend.server import TritonServer
from pybackend.server.processes import descendants

MODELS = Path(__file__).resolve().parent / "models"
# Instances in separate processes never all reach one barrier: give up on it soon (it is a
# bound, not a measurement: the answer is "broken" however long the wait).
SEPARATE = {"BARRIER_S": "3"}
OP_IDENT, OP_BARRIER, OP_EXIT, OP_SEGV, OP_HANG, OP_SHARED, OP_PARK, OP_QUIT, OP_OUTLIVE = range(9)


def config(
    mode: str | None,
    count: int,
    *,
    decoupled: bool = False,
    kind: str = "KIND_CPU",
    params: dict[str, str] | None = None,
) -> str:
    doc: dict[str, Any] = {
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "OP", "data_type": "TYPE_INT32", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
        "instance_group": [{"count": count, "kind": kind}],
    }
    if decoupled:
        doc["model_transaction_policy"] = {"decoupled": True}
    parameters = dict(params or {})
    if mode is not None:
        parameters["PYBACKEND_INSTANCE_PROCESS"] = mode
    if parameters:
        doc["parameters"] = {k: {"string_value": v} for k, v in parameters.items()}
    return json.dumps(doc)


def make_server(tmp_path: Path, **kwargs: Any) -> TritonServer:
    repo = tmp_path / "models"
    shutil.copytree(MODELS, repo)
    return TritonServer(repo, backend="ours", model_control_mode="explicit", **kwargs)


def unloading_client(server: TritonServer, *models: str) -> Iterator[Any]:
    """The body of a test's ``client`` fixture: an HTTP client of ``server`` (``.url`` set
    for helpers that open their own), and afterwards ``models`` unloaded (those still
    loaded) so the next test starts from none."""
    c = httpclient.InferenceServerClient(server.http_url)
    c.url = server.http_url
    yield c
    for model in models:
        try:
            c.unload_model(model)
        except InferenceServerException:
            pass
    c.close()


def call(client: Any, op: int, model: str = "ident") -> dict[str, Any]:
    inp = httpclient.InferInput("OP", [1], "INT32")
    inp.set_data_from_numpy(np.array([op], np.int32))
    result = client.infer(model, [inp])
    return json.loads(result.as_numpy("OUT")[0])


def call_url(url: str, op: int, model: str = "ident") -> dict[str, Any]:
    """call() with a client of its own (the HTTP client is not for several threads)."""
    client = httpclient.InferenceServerClient(url, network_timeout=120.0)
    try:
        return call(client, op, model)
    finally:
        client.close()


def at_once(url: str, op: int, n: int, model: str = "ident") -> list[Any]:
    """n calls in parallel; each result is the answer or the InferenceServerException."""

    def one(_: int) -> Any:
        try:
            return call_url(url, op, model)
        except InferenceServerException as e:
            return e

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def stub_processes(server: TritonServer) -> dict[int, str]:
    """pid -> command line of every pybackend stub or host process under the server."""
    found = {}
    for pid in descendants(server.pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "pybackend.stub" in cmd:
            found[pid] = cmd
    return found


def settled(server: TritonServer, n: int, timeout: float = 30.0) -> dict[int, str]:
    """stub_processes once there are n of them (an unloaded model's go away in the
    background; a new one's start with its load). Bounded: returns what is there then."""
    deadline = time.monotonic() + timeout
    while True:
        procs = stub_processes(server)
        if len(procs) == n or time.monotonic() > deadline:
            return procs
        time.sleep(0.05)


def host_and_children(server: TritonServer, expected: int) -> tuple[int, set[int]]:
    """Under `fork`: the importing process (the server's child) and its forked children."""
    procs = settled(server, expected)
    hosts = [p for p in procs if parent_of(p) == server.pid]
    assert len(hosts) == 1, procs
    (host,) = hosts
    children = {p for p in procs if p != host}
    assert all(parent_of(p) == host for p in children)
    return host, children


def imports(server: TritonServer, model: str = "ident") -> list[int]:
    """The pids that imported the model's model.py, one per import."""
    log = server.model_repository / model / "1" / "imports.log"
    if not log.exists():
        return []
    return [int(line) for line in log.read_text().split()]
