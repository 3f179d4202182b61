"""PYBACKEND_INSTANCE_PROCESS=fork through the real tritonserver (issue 29): model.py is
imported once, each instance is a forked child serving as a normal stub, and nothing
outlives the server."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tritonclient.http as httpclient
from instances_support import (
    OP_BARRIER,
    OP_EXIT,
    OP_HANG,
    OP_IDENT,
    SEPARATE,
    at_once,
    call,
    config,
    host_and_children,
    imports,
    make_server,
    parent_of,
    settled,
    unloading_client,
)
from tritonclient.utils import InferenceServerException

from pybackend.server import TritonServer
from pybackend.server.processes import alive

COUNT = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    backend_config = [("stub-restart-max-backoff-seconds", "1")]
    with make_server(tmp_path_factory.mktemp("fork"), backend_config=backend_config) as s:
        yield s


@pytest.fixture
def client(server: TritonServer) -> Iterator[Any]:
    yield from unloading_client(server, "ident", "cuda_at_import")


def test_one_import_then_a_forked_child_per_instance(server: TritonServer, client: Any):
    log = server.model_repository / "ident" / "1" / "imports.log"
    log.unlink(missing_ok=True)
    client.load_model("ident", config=config("fork", COUNT, params=SEPARATE))
    host, children = host_and_children(server, COUNT + 1)
    assert len(children) == COUNT
    assert imports(server) == [host]  # imported once, by the host, before the forks
    answers = at_once(server.http_url, OP_BARRIER, COUNT)
    # Separate processes: the module-level barrier cannot open across them.
    assert {a["barrier"] for a in answers} == {"broken"}
    assert {a["pid"] for a in answers} == children
    assert {a["args"]["model_instance_name"] for a in answers} == {
        f"ident_0_{i}" for i in range(COUNT)
    }


def test_a_child_crash_fails_its_request_and_a_new_child_is_forked(
    server: TritonServer, client: Any
):
    (server.model_repository / "ident" / "1" / "imports.log").unlink(missing_ok=True)
    client.load_model("ident", config=config("fork", 1))
    host, (child,) = host_and_children(server, 2)
    with pytest.raises(InferenceServerException) as e:
        call(client, OP_EXIT)
    text = str(e.value)
    assert "model 'ident'" in text and "instance 'ident_0_0'" in text, text
    assert "PYBACKEND_INSTANCE_PROCESS=fork" in text and "exited with code 7" in text, text
    deadline = time.monotonic() + 60
    while True:
        try:
            answer = call(client, OP_BARRIER)
            break
        except InferenceServerException:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert answer["pid"] not in (child, host)
    assert parent_of(answer["pid"]) == host
    assert imports(server) == [host]


def test_an_execute_timeout_ends_only_that_instances_child(tmp_path: Path):
    backend_config = [
        ("stub-restart-max-backoff-seconds", "1"),
        ("execute-timeout-seconds", "3"),
    ]
    with make_server(tmp_path, backend_config=backend_config) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            client.load_model("ident", config=config("fork", 2, params=SEPARATE))
            host, children = host_and_children(server, 3)
            with pytest.raises(InferenceServerException) as e:
                call(client, OP_HANG)
            text = str(e.value)
            assert "execute took longer than execute-timeout-seconds=3" in text, text
            assert "PYBACKEND_INSTANCE_PROCESS=fork" in text and "killed by signal 9" in text
            # The importing process lives on; one new child replaces the one that was ended.
            deadline = time.monotonic() + 60
            while True:
                now_host, now_children = host_and_children(server, 3)
                if len(now_children - children) == 1:
                    break
                assert time.monotonic() < deadline, (children, now_children)
                time.sleep(0.1)
            assert now_host == host
            assert len(now_children & children) == 1
        finally:
            client.close()


def test_cuda_initialized_by_the_import_refuses_fork(client: Any):
    with pytest.raises(InferenceServerException) as e:
        client.load_model("cuda_at_import", config=config("fork", 2))
    text = str(e.value)
    assert "initialized CUDA" in text and "torch.cuda.is_initialized()" in text, text
    assert "into initialize()" in text and '"shared" or "own"' in text, text


@pytest.mark.parametrize("mode", ["fork", "shared"])
def test_nothing_outlives_a_killed_server(tmp_path: Path, mode: str):
    server = make_server(tmp_path)
    with server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            client.load_model("ident", config=config(mode, COUNT))
            # One call (a barrier of COUNT parties would wait its whole bound, 60 s, for it).
            call(client, OP_IDENT)
        finally:
            client.close()
        procs = set(settled(server, COUNT + 1 if mode == "fork" else 1))
        assert len(procs) == (COUNT + 1 if mode == "fork" else 1)
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(alive(p) for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in procs if alive(p)]


def test_threads_started_by_the_import_are_named_in_a_warning(server: TritonServer):
    # A forked child has none of them; one that waits for them hangs, so say it up front.
    c = httpclient.InferenceServerClient(server.http_url)
    try:
        c.load_model("import_thread", config=config("fork", 1))
        c.unload_model("import_thread")
    finally:
        c.close()
    lines = [line for line in server.log_text().splitlines() if "started threads" in line]
    assert len(lines) == 1, lines
    assert "model 'import_thread'" in lines[0] and "(import-time-worker)" in lines[0]
    assert "PYBACKEND_INSTANCE_PROCESS=fork" in lines[0] and "in initialize()" in lines[0]
