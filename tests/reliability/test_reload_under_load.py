"""A model reloaded under load (UV-36): tritonserver keeps the old instances serving until the
new ones are initialized, and our backend must not fail a request in between: no error, the
answers switch from the old configuration to the new one, the old stubs are gone after."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from reliability_support import start, stubs, wait_for

from conformance_support.metrics_endpoint import samples, scrape

CLIENTS = 4


@pytest.fixture
def server() -> Iterator[Any]:
    with start(["reloading"]) as s:
        yield s


def config(tag: str) -> str:
    return json.dumps(
        {
            "backend": "python",
            "max_batch_size": 0,
            "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [1]}],
            "output": [{"name": "TAG", "data_type": "TYPE_STRING", "dims": [1]}],
            "instance_group": [{"kind": "KIND_CPU", "count": 2}],
            "parameters": {
                "TAG": {"string_value": tag},
                "INIT_SECONDS": {"string_value": "1.0"},
            },
        }
    )


def test_requests_during_a_reload_all_succeed(server):
    old_stubs = stubs(server, "reloading")
    assert len(old_stubs) == 2
    stop = threading.Event()
    answers: list[list[tuple[float, str]]] = [[] for _ in range(CLIENTS)]
    failures: list[str] = []

    def load(i: int) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        inp = grpcclient.InferInput("IN", [1], "INT32")
        inp.set_data_from_numpy(np.array([i], np.int32))
        try:
            while not stop.is_set():
                try:
                    result = client.infer("reloading", [inp], client_timeout=30)
                    answers[i].append((time.monotonic(), result.as_numpy("TAG")[0].decode()))
                except Exception as e:  # noqa: BLE001 - every failure is the finding
                    failures.append(f"{type(e).__name__}: {e}")
        finally:
            client.close()

    threads = [threading.Thread(target=load, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    try:
        wait_for("requests before the reload", lambda: all(answers) or None, timeout=30)
        control = grpcclient.InferenceServerClient(server.grpc_url)
        started = time.monotonic()
        control.load_model("reloading", config=config("second"))
        reload_s = time.monotonic() - started
        control.close()
        wait_for(
            "answers of the new configuration",
            lambda: all(a and a[-1][1] == "second" for a in answers) or None,
            timeout=30,
        )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert failures == []
    # The old instances answered while the new ones were in their 1 s initialize(), and
    # every client saw the old configuration, then the new one, nothing in between.
    during = [tag for a in answers for at, tag in a if started + 0.5 < at < started + reload_s]
    assert "first" in during
    for seen in answers:
        tags = [tag for _, tag in seen]
        switch = tags.index("second")
        assert set(tags[:switch]) == {"first"} and set(tags[switch:]) == {"second"}
    new_stubs = wait_for(
        "the old stubs to go",
        lambda: (
            s
            if len(s := stubs(server, "reloading")) == 2
            and not set(s.values()) & set(old_stubs.values())
            else None
        ),
        timeout=30,
    )
    assert len(new_stubs) == 2
    # The new instances carry the same names as the old ones: finalizing the old ones must
    # not take the new ones' per-instance metric series with them.
    ready = {
        labels: value
        for (name, labels), value in samples(scrape(server), "pybackend_stub_ready").items()
        if ("model", "reloading") in labels
    }
    assert sorted(ready.values()) == [1.0, 1.0]
