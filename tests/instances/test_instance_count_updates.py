"""A `shared` or `fork` model loaded again with another instance count (explicit model
control, issue 29) after files in its directory changed (the model writes its logs there):
tritonserver 2.51 then loads the new model and unloads the old one, not only the instances
that differ (those updates: conformance/model_control/test_instance_updates.py). The new
instances start together in one new process (`shared`) or as children of one new importing
process (`fork`), each with its own identity; every old instance is finalized in the old
process, and that process ends with its model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from instances_support import (
    OP_BARRIER,
    at_once,
    config,
    host_and_children,
    make_server,
    parent_of,
    settled,
    unloading_client,
)

from pybackend.server import TritonServer

COUNTS = (2, 8, 1, 8, 1)
# How long an old process may outlive its model. A bound, not a measurement: the old
# process ends as soon as its last instance is finalized (milliseconds here); finalizing
# each instance of a shared process used to wait about 1.7 s for that process to exit, so
# 8 instances kept it for 10 s and more.
GONE_S = 5.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with make_server(tmp_path_factory.mktemp("updates")) as s:
        yield s


@pytest.fixture
def client(server: TritonServer) -> Iterator[Any]:
    yield from unloading_client(server, "ident")


def finalized(server: TritonServer) -> Counter[tuple[str, int]]:
    log = server.model_repository / "ident" / "1" / "finalized.log"
    lines = log.read_text().split("\n") if log.exists() else []
    return Counter((name, int(pid)) for name, pid in (line.split() for line in lines if line))


@pytest.mark.parametrize("mode", ["shared", "fork"])
def test_a_new_instance_count_replaces_the_process_and_finalizes_the_old_instances(
    server: TritonServer, client: Any, mode: str
):
    (server.model_repository / "ident" / "1" / "finalized.log").unlink(missing_ok=True)
    # Under fork each instance is a process of its own: the barrier cannot open there, so
    # it breaks soon (it only makes every instance take one of the calls).
    params = {"BARRIER_S": "1"} if mode == "fork" else None
    expected: Counter[tuple[str, int]] = Counter()
    previous: dict[str, int] = {}  # instance name -> pid that served it
    for count in COUNTS:
        client.load_model("ident", config=config(mode, count, params=params))
        expected.update(previous.items())
        procs = settled(server, 1 if mode == "shared" else 1 + count, timeout=GONE_S)
        if mode == "shared":
            assert len(procs) == 1, procs
            (host,) = procs
            assert parent_of(host) == server.pid
        else:
            host, children = host_and_children(server, 1 + count)
            assert len(children) == count, procs
        answers = at_once(client.url, OP_BARRIER, count)
        assert all(isinstance(a, dict) for a in answers), answers
        served = {a["args"]["model_instance_name"]: a["pid"] for a in answers}
        assert set(served) == {f"ident_0_{i}" for i in range(count)}, answers
        if mode == "shared":
            # The barrier of `count` parties opened: every instance in this one process.
            assert all(a["barrier"] != "broken" for a in answers), answers
            assert set(served.values()) == {host}
        else:
            assert set(served.values()) == children
        for a in answers:
            assert a["args"]["model_instance_kind"] == "CPU"
            assert a["args"]["model_instance_device_id"] == "0"
        # Every instance of the model this load replaced was finalized, in its process.
        assert finalized(server) == expected
        previous = served
    client.unload_model("ident")
    assert settled(server, 0, timeout=GONE_S) == {}
    expected.update(previous.items())
    assert finalized(server) == expected
