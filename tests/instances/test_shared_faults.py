"""Faults of a shared process (issue 29): a crash fails the in-flight requests of every
instance it served and all instances come back; an execute timeout restarts the whole
process; an initialize that fails in one instance fails the load and leaves nothing."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import tritonclient.http as httpclient
from instances_support import (
    OP_BARRIER,
    OP_EXIT,
    OP_HANG,
    OP_OUTLIVE,
    OP_PARK,
    OP_QUIT,
    OP_SEGV,
    at_once,
    call_url,
    config,
    make_server,
    settled,
    stub_processes,
    unloading_client,
)
from tritonclient.utils import InferenceServerException

from conformance_support.metrics_endpoint import samples, scrape
from pybackend.server import TritonServer

COUNT = 3
EXECUTE_TIMEOUT_S = 3
INSTANCES = {f"ident_0_{i}" for i in range(COUNT)}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    backend_config = [("stub-restart-max-backoff-seconds", "1")]
    with make_server(tmp_path_factory.mktemp("faults"), backend_config=backend_config) as s:
        yield s


@pytest.fixture
def timeout_server(tmp_path: Path) -> Iterator[TritonServer]:
    backend_config = [
        ("stub-restart-max-backoff-seconds", "1"),
        ("execute-timeout-seconds", str(EXECUTE_TIMEOUT_S)),
    ]
    with make_server(tmp_path, backend_config=backend_config) as s:
        yield s


@pytest.fixture
def client(server: TritonServer) -> Iterator[Any]:
    yield from unloading_client(server, "ident")


def outcome(url: str, op: int) -> Any:
    try:
        return call_url(url, op)
    except InferenceServerException as e:
        return e


def restarts(server: TritonServer) -> dict[str, float]:
    found = {}
    for (metric, labels), value in samples(scrape(server), "pybackend_stub_restarts").items():
        labels = dict(labels)
        if metric == "pybackend_stub_restarts" and labels.get("model") == "ident":
            found[labels["instance"]] = value
    return found


def all_back(client: Any, old_pid: int) -> list[dict[str, Any]]:
    """Waits (bounded) until every instance serves again, from a new process."""
    deadline = time.monotonic() + 60
    while True:
        answers = at_once(client.url, OP_BARRIER, COUNT)
        if all(isinstance(a, dict) and a["barrier"] != "broken" for a in answers):
            assert {a["pid"] for a in answers} != {old_pid}
            return answers
        texts = [str(a) for a in answers]
        assert time.monotonic() < deadline, f"the instances did not come back: {texts}"
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("op", "how"), [(OP_EXIT, "exited with code 7"), (OP_SEGV, "killed by signal 11 (SIGSEGV)")]
)
def test_a_crash_fails_every_instance_in_flight_then_all_come_back(
    server: TritonServer, client: Any, op: int, how: str
):
    client.load_model("ident", config=config("shared", COUNT))
    (host,) = settled(server, 1)
    before = restarts(server)
    with ThreadPoolExecutor(COUNT) as pool:
        parked = [pool.submit(outcome, client.url, OP_PARK) for _ in range(COUNT - 1)]
        crash = pool.submit(outcome, client.url, op)
        results = [f.result(timeout=120) for f in [*parked, crash]]
    assert all(isinstance(r, InferenceServerException) for r in results), results
    named = set()
    for r in results:
        text = str(r)
        assert "model 'ident'" in text and how in text, text
        assert "PYBACKEND_INSTANCE_PROCESS=shared" in text, text
        named |= {i for i in INSTANCES if f"instance '{i}'" in text}
    assert named == INSTANCES  # each error names the instance its request was on
    answers = all_back(client, host)
    assert {a["args"]["model_instance_name"] for a in answers} == INSTANCES
    assert len(settled(server, 1)) == 1
    after = restarts(server)
    assert {i: after[i] - before[i] for i in INSTANCES} == dict.fromkeys(INSTANCES, 1.0)


def test_a_sigkill_fails_every_instance_in_flight_then_all_come_back(
    server: TritonServer, client: Any
):
    client.load_model("ident", config=config("shared", COUNT))
    (host,) = settled(server, 1)
    parked = server.model_repository / "ident" / "1" / "parked.log"
    parked.unlink(missing_ok=True)
    with ThreadPoolExecutor(COUNT) as pool:
        futures = [pool.submit(outcome, client.url, OP_PARK) for _ in range(COUNT)]
        deadline = time.monotonic() + 60
        while len(parked.read_text().split() if parked.exists() else []) < COUNT:
            assert time.monotonic() < deadline, "the requests did not all reach execute"
            time.sleep(0.02)
        os.kill(host, signal.SIGKILL)  # as the OOM killer would
        results = [f.result(timeout=120) for f in futures]
    named = set()
    for r in results:
        assert isinstance(r, InferenceServerException), r
        assert "killed by signal 9 (SIGKILL)" in str(r), str(r)
        named |= {i for i in INSTANCES if f"instance '{i}'" in str(r)}
    assert named == INSTANCES
    all_back(client, host)


def test_an_execute_timeout_restarts_the_whole_process(timeout_server: TritonServer):
    server = timeout_server
    client = httpclient.InferenceServerClient(server.http_url)
    client.url = server.http_url
    # The barrier that checks the instances are back must give up before the execute
    # timeout does, or a late instance would make the check itself time out.
    client.load_model("ident", config=config("shared", COUNT, params={"BARRIER_S": "2"}))
    (host,) = settled(server, 1)
    result = outcome(client.url, OP_HANG)
    assert isinstance(result, InferenceServerException), result
    text = str(result)
    assert f"execute took longer than execute-timeout-seconds={EXECUTE_TIMEOUT_S}" in text
    assert "a thread cannot be stopped alone" in text and "every instance" in text, text
    answers = all_back(client, host)
    assert {a["args"]["model_instance_name"] for a in answers} == INSTANCES
    client.close()


def test_initialize_failing_in_one_instance_fails_the_load_and_leaves_no_process(
    server: TritonServer, client: Any
):
    bad = config("shared", COUNT, params={"FAIL_INIT": "ident_0_1"})
    with pytest.raises(InferenceServerException) as e:
        client.load_model("ident", config=bad)
    assert "initialize refused by FAIL_INIT for ident_0_1" in str(e.value)
    deadline = time.monotonic() + 30
    while stub_processes(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub_processes(server) == {}


def test_an_instance_whose_thread_ends_restarts_alone_in_the_same_process(
    server: TritonServer, client: Any
):
    # One instance's channels break (OP_QUIT): that instance's thread ends, not the process;
    # the other instance's request in flight is answered, and the process is not replaced.
    client.load_model("ident", config=config("shared", 2))
    (host,) = settled(server, 1)
    with ThreadPoolExecutor(2) as pool:
        outliving = pool.submit(outcome, client.url, OP_OUTLIVE)
        time.sleep(0.3)  # (only so that it is the first one in execute; either order works)
        quitting = pool.submit(outcome, client.url, OP_QUIT)
        quit_answer, outlive_answer = quitting.result(), outliving.result()
    assert isinstance(quit_answer, InferenceServerException), quit_answer
    assert "is not healthy" in str(quit_answer), quit_answer
    assert "this instance's thread in it has ended" in str(quit_answer), quit_answer
    assert isinstance(outlive_answer, dict), outlive_answer
    assert outlive_answer["pid"] == host
    deadline = time.monotonic() + 60
    while True:  # the ended instance restarts, in the same process
        answers = at_once(client.url, OP_BARRIER, 2)
        if all(isinstance(a, dict) and a["barrier"] != "broken" for a in answers):
            break
        assert time.monotonic() < deadline, answers
        time.sleep(0.2)
    assert {a["pid"] for a in answers} == {host}
    assert set(stub_processes(server)) == {host}
