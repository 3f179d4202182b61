"""PYBACKEND_INSTANCE_PROCESS=shared through the real tritonserver (issue 29): one process
serves every instance, each with its own identity, thread and concurrent execute."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from instances_support import (
    OP_BARRIER,
    OP_IDENT,
    OP_SHARED,
    SEPARATE,
    at_once,
    call,
    config,
    imports,
    make_server,
    settled,
    unloading_client,
)
from tritonclient.utils import InferenceServerException

from pybackend.server import TritonServer

COUNT = 3
IMPORT_THREAD_FORKS = 1  # the import_thread model's OP for a BLS call from a forked child


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with make_server(tmp_path_factory.mktemp("shared")) as s:
        yield s


@pytest.fixture
def client(server: TritonServer) -> Iterator[Any]:
    yield from unloading_client(server, "stream", "fork_pool", "ident")


def concurrent(client: Any, op: int, n: int) -> list[dict[str, Any]]:
    answers = at_once(client.url, op, n)
    assert all(isinstance(a, dict) for a in answers), answers
    return answers


def test_every_instance_has_its_own_identity_in_one_process(server: TritonServer, client: Any):
    (server.model_repository / "ident" / "1" / "imports.log").unlink(missing_ok=True)
    client.load_model("ident", config=config("shared", COUNT))
    procs = settled(server, 1)
    assert len(procs) == 1, procs
    (host,) = procs
    assert "pybackend.stub.host" in procs[host]
    # model.py imported once, in that process (auto-complete included).
    assert imports(server) == [host]
    answers = concurrent(client, OP_BARRIER, COUNT)
    # The module-level barrier of COUNT parties opened: all instances were in execute at
    # once, in one process, each on a thread of its own.
    assert all(a["barrier"] != "broken" for a in answers), answers
    assert {a["pid"] for a in answers} == {host}
    names = {a["args"]["model_instance_name"] for a in answers}
    assert names == {f"ident_0_{i}" for i in range(COUNT)}
    assert len({a["thread"] for a in answers}) == COUNT
    for a in answers:
        args = a["args"]
        assert args["model_instance_kind"] == "CPU"
        assert args["model_instance_device_id"] == "0"
        assert args["model_name"] == "ident"
        assert args["model_version"] == "1"
        assert args["model_repository"].endswith("/ident")
        assert a["thread"] == a["init_thread"]  # execute runs on the instance's own thread


def test_own_mode_keeps_a_process_per_instance(server: TritonServer, client: Any):
    client.load_model("ident", config=config("own", COUNT, params=SEPARATE))
    assert len(settled(server, COUNT)) == COUNT
    # The barrier is per process here: it cannot open, so the instances report it broken.
    answers = concurrent(client, OP_BARRIER, COUNT)
    assert {a["barrier"] for a in answers} == {"broken"}
    assert len({a["pid"] for a in answers}) == COUNT


def test_pb_utils_shared_is_one_object_per_process(server: TritonServer, client: Any):
    client.load_model("ident", config=config("shared", COUNT))
    answers = concurrent(client, OP_BARRIER, COUNT)  # one call per instance, all at once
    answers = [call(client, OP_SHARED) for _ in range(4 * COUNT)]
    assert len({a["shared"] for a in answers}) == 1
    assert {a["builds"] for a in answers} == {1}
    client.unload_model("ident")
    client.load_model("ident", config=config("own", COUNT, params=SEPARATE))
    by_pid = {a["pid"]: a for a in concurrent(client, OP_BARRIER, COUNT)}
    assert len(by_pid) == COUNT
    shared = [call(client, OP_SHARED) for _ in range(4 * COUNT)]
    # Each process built its own (one build each).
    assert {a["builds"] for a in shared} == {1}


def test_bad_mode_fails_the_load_naming_the_valid_values(client: Any):
    with pytest.raises(InferenceServerException) as e:
        client.load_model("ident", config=config("threads", COUNT))
    text = str(e.value)
    assert "PYBACKEND_INSTANCE_PROCESS" in text and "'threads'" in text
    for mode in ('"own"', '"shared"', '"fork"'):
        assert mode in text


def test_decoupled_senders_and_bls_from_every_instance_at_once(server: TritonServer, client: Any):
    client.load_model("ident", config=config("shared", 1))
    client.load_model("stream", config=config("shared", COUNT, decoupled=True))
    assert len(settled(server, 2)) == 2  # one per model
    got: queue.Queue = queue.Queue()
    stream = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        stream.start_stream(callback=lambda result, error: got.put((result, error)))
        for i in range(COUNT):
            inp = grpcclient.InferInput("OP", [1], "INT32")
            inp.set_data_from_numpy(np.array([0], np.int32))
            stream.async_stream_infer("stream", [inp], request_id=str(i))
        answers = []
        for _ in range(3 * COUNT):
            result, error = got.get(timeout=60)
            assert error is None, error
            answers.append(json.loads(result.as_numpy("OUT")[0]))
    finally:
        stream.stop_stream()
        stream.close()
    assert {a["instance"] for a in answers} == {f"stream_0_{i}" for i in range(COUNT)}
    assert all(a["together"] for a in answers), answers
    assert {a["callee"] for a in answers} == {"ident_0_0"}
    assert sorted(a["i"] for a in answers) == sorted(list(range(3)) * COUNT)


def test_identity_answers_come_from_their_own_instance(client: Any):
    client.load_model("ident", config=config("shared", 2))
    seen = {call(client, OP_IDENT)["args"]["model_instance_name"] for _ in range(8)}
    assert seen <= {"ident_0_0", "ident_0_1"}


def test_a_thread_started_at_import_cannot_make_bls_calls_and_says_why(client: Any):
    client.load_model("import_thread", config=config("shared", 2))
    try:
        answer = call(client, OP_IDENT, model="import_thread")
        # A process that thread forks has no route (to which instance?): refused too, at once.
        forked = call(client, IMPORT_THREAD_FORKS, model="import_thread")
    finally:
        client.unload_model("import_thread")
    for a in (answer, forked):
        assert a["status"] == "error", a
        assert "works for no instance" in a["text"], a
        assert "model 'import_thread'" in a["text"], a


def test_forked_workers_of_every_instance_make_bls_calls(server: TritonServer, client: Any):
    # A multiprocessing 'fork' Pool in execute, on both instances' threads at once: each
    # worker's exec() goes through the instance whose thread forked it (fork_route.py), and
    # it holds none of the sockets of the process it was forked from.
    client.load_model("ident", config=config(None, 1))
    client.load_model("fork_pool", config=config("shared", 2))
    procs = settled(server, 2)  # ident's stub and fork_pool's shared process
    for _ in range(2):
        answers = at_once(client.url, OP_IDENT, 2, model="fork_pool")
        assert all(isinstance(a, dict) for a in answers), answers
        assert {a["instance"] for a in answers} == {"fork_pool_0_0", "fork_pool_0_1"}
        assert all(a["together"] for a in answers), answers
        (host,) = {a["pid"] for a in answers}
        assert host in procs
        for a in answers:
            workers = a["workers"]
            assert isinstance(workers, list) and len(workers) == 3, a
            assert all(w.get("callee") == "ident_0_0" for w in workers), a
            assert all(w["pid"] != host for w in workers), a
            # Its route and nothing else: no instance's channels, no control socket, no
            # other worker's route (their copies would hide a process's death from its peer).
            assert all(len(w["sockets"]) == 1 for w in workers), a
