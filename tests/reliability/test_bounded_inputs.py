"""Requests whose inputs each fit under shm-max-byte-size but together exceed it are served:
the backend's arena waits (bounded) for input blocks the stub still holds to come back, as
the stub's arena does for outputs (test_bounded_stream.py). Found by the operator probe:
with a decoupled model whose threads hold their inputs a moment after execute, 6 of 8
concurrent 6 MiB requests under a 16 MiB bound failed at once (`no shared memory for input
'IN' (6291456 bytes) ... 12582912 in use`), though the stub returns each block as soon as
its thread drops it. What can never fit still fails at once: a block larger
than the bound, and inputs of one request that together exceed it (the blocks that could
come back are that request's own, which the instance thread holds while it waits).

BLS outputs land in the caller's backend arena and wait the same way, except on a monitor
thread (a decoupled callee's responses are written there): it handles its own instance's
FREEs, and waiting would stall them. A decoupled BLS stream whose caller keeps every response
beyond the bound therefore gets error responses for those that found no room: the model is
given each of them (marked undelivered on the wire), never a stream with responses silently
missing, which is what it got before (6 of 8 responses dropped as if the callee's own
non-final errors, with only a warning in the log)."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from reliability_support import start

MiB = 1 << 20
CAP = 16 * MiB
WAITED = "(after waiting 2 s for blocks in use to come back)"


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    models = ["hold_inputs", "big_identity", "bls_threads", "stream_big", "bls_stream_keeper"]
    with start(models, backend_config=[("shm-max-byte-size", str(CAP))]) as s:
        yield s


def _requests(server: Any, requests: list[dict[str, Any]]) -> tuple[dict[int, Any], list[Any]]:
    """Sends every request on one stream without waiting; returns the OUT of each request
    served (by its index) and the errors (a stream's error names no request)."""
    import tritonclient.grpc as grpcclient

    q: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: q.put(error or result))
        for i, req in enumerate(requests):
            inputs = []
            for name, value in req.items():
                dtype = "INT64" if name == "HOLD_MS" else "UINT8"
                inp = grpcclient.InferInput(name, list(value.shape), dtype)
                inp.set_data_from_numpy(value)
                inputs.append(inp)
            client.async_stream_infer("hold_inputs", inputs, request_id=str(i))
        served: dict[int, Any] = {}
        errors: list[Any] = []
        while len(served) + len(errors) < len(requests):
            item = q.get(timeout=60)
            if isinstance(item, Exception):
                errors.append(item)
            else:
                served[int(item.get_response().id)] = item.as_numpy("OUT")
        return served, errors
    finally:
        client.stop_stream()
        client.close()


def test_concurrent_inputs_beyond_the_bound_are_served(server: Any) -> None:
    sent = [{"IN": np.full(6 * MiB, i, np.uint8)} for i in range(8)]  # 48 MiB under 16 MiB
    served, errors = _requests(server, sent)
    assert not errors, [str(e) for e in errors]
    for i in range(8):
        assert list(served[i]) == [6 * MiB, i, 0]


def test_an_input_larger_than_the_bound_fails_at_once(server: Any) -> None:
    _, (error,) = _requests(server, [{"IN": np.ones(2 * CAP, np.uint8)}])
    assert f"does not fit under the shared-memory limit of {CAP} bytes" in str(error)
    assert "after waiting" not in str(error)


def test_inputs_of_one_request_beyond_the_bound_fail_at_once(server: Any) -> None:
    """The second input waits for nothing: with the first, which the request being encoded
    holds itself, it is over the bound. Another request's block in use (held 5 s) does not
    change that: even its return would leave too little."""
    holder = {"IN": np.ones(2 * MiB, np.uint8), "HOLD_MS": np.array([5000], np.int64)}
    pair = {"IN": np.ones(10 * MiB, np.uint8), "IN2": np.ones(7 * MiB, np.uint8)}
    served, (error,) = _requests(server, [holder, pair])
    assert "no shared memory for input 'IN2'" in str(error)
    assert "after waiting" not in str(error)
    assert list(served[0]) == [2 * MiB, 1, 0]


def test_blocks_that_do_not_come_back_in_time_fail_after_the_wait(server: Any) -> None:
    holder = {"IN": np.ones(10 * MiB, np.uint8), "HOLD_MS": np.array([5000], np.int64)}
    served, (error,) = _requests(server, [holder, {"IN": np.ones(10 * MiB, np.uint8)}])
    assert f"does not fit under the shared-memory limit of {CAP} bytes" in str(error)
    assert WAITED in str(error)
    assert list(served[0]) == [10 * MiB, 1, 0]
    # The instance keeps serving.
    served, errors = _requests(server, [{"IN": np.full(10 * MiB, 9, np.uint8)}])
    assert not errors and list(served[0]) == [10 * MiB, 9, 0]


def test_concurrent_bls_outputs_beyond_the_bound_are_served(server: Any, http: Any) -> None:
    """4 threads of the caller each get a 6 MiB BLS output (24 MiB under a 16 MiB bound) and
    hold it 300 ms: the callee's later outputs wait for the earlier ones to be dropped."""
    import tritonclient.http as httpclient

    inp = httpclient.InferInput("N", [2], "INT64")
    inp.set_data_from_numpy(np.array([4, 6 * MiB], np.int64))
    result = http(server).infer("bls_threads", [inp])
    assert list(result.as_numpy("OK")) == [4]


def test_a_kept_bls_stream_beyond_the_bound_reports_every_response(server: Any, http: Any) -> None:
    import json

    import tritonclient.http as httpclient

    inp = httpclient.InferInput("N", [2], "INT64")
    inp.set_data_from_numpy(np.array([8, 6 * MiB], np.int64))
    result = http(server).infer("bls_stream_keeper", [inp])
    report = json.loads(result.as_numpy("REPORT")[0])
    assert report["kept"] >= 1 and report["errors"], report
    assert report["kept"] + len(report["errors"]) == 8, report
    for error in report["errors"]:
        assert "BLS output 'OUT' of model 'stream_big'" in error
        assert "does not fit in shared memory" in error and "shm-max-byte-size" in error
