"""Cancellation through the real tritonserver: a request's ``is_cancelled()`` reaches the
bound callable, and a decoupled callable's generator is closed once its gRPC client
cancels the stream; the instance then serves the next request."""

from __future__ import annotations

import asyncio
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from integration_support.pytriton_helpers import urls
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.proxy.types import Request
from pybackend.pytriton.triton import Triton

IO = {
    "inputs": [Tensor(name="count", dtype=np.int32, shape=(1,))],
    "outputs": [Tensor(name="step", dtype=np.int32, shape=(1,))],
}
_WAIT_S = 60.0  # bound on every wait; the happy path takes milliseconds


class _Probe:
    """The side channel: the callable runs in this process, so it reports here."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.closed = threading.Event()
        self.steps = 0
        self.closed_count = 0
        self.cancelled_seen: List[bool] = []


def _slow_stream(probe: _Probe) -> Any:
    def infer(requests: List[Request]) -> Any:
        n = int(requests[0]["count"].reshape(-1)[0])
        probe.started.set()
        try:
            for i in range(n):
                probe.steps += 1
                yield [{"step": np.array([[i]], np.int32)} for _ in requests]
                time.sleep(0.05)  # slow steps: the client cancels meanwhile
        finally:
            # Reached by GeneratorExit when the server stops iterating, or at the end.
            probe.closed_count += 1
            probe.closed.set()

    return infer


def _slow_stream_async(probe: _Probe) -> Any:
    async def infer(requests: List[Request]) -> Any:
        n = int(requests[0]["count"].reshape(-1)[0])
        probe.started.set()
        try:
            for i in range(n):
                probe.steps += 1
                yield [{"step": np.array([[i]], np.int32)} for _ in requests]
                await asyncio.sleep(0.05)
        finally:
            probe.closed_count += 1
            probe.closed.set()

    return infer


def _stream_once(url: str, model: str, count: int) -> List[int]:
    """One request on a gRPC stream, every response until the final one."""
    got: "queue.Queue[Any]" = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    try:
        client.start_stream(callback=lambda result, error: got.put(error or result))
        inp = grpcclient.InferInput("count", [1, 1], "INT32")
        inp.set_data_from_numpy(np.array([[count]], np.int32))
        client.async_stream_infer(model, [inp], enable_empty_final_response=True)
        steps: List[int] = []
        while True:
            item = got.get(timeout=_WAIT_S)
            assert not isinstance(item, Exception), item
            response = item.get_response()
            if response.outputs:
                steps.append(int(item.as_numpy("step").reshape(-1)[0]))
            if response.parameters["triton_final_response"].bool_param:
                return steps
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.parametrize("make", [_slow_stream, _slow_stream_async], ids=["gen", "asyncgen"])
def test_cancelled_stream_closes_the_generator(triton: Triton, make: Any) -> None:
    probe = _Probe()
    config = ModelConfig(max_batch_size=4, decoupled=True)
    triton.bind("Slow", make(probe), **IO, config=config)  # type: ignore[arg-type]
    triton.run()
    grpc_url = urls(triton)[1].removeprefix("grpc://")

    first: "queue.Queue[Any]" = queue.Queue()
    client = grpcclient.InferenceServerClient(grpc_url)
    try:
        client.start_stream(callback=lambda result, error: first.put(error or result))
        inp = grpcclient.InferInput("count", [1, 1], "INT32")
        inp.set_data_from_numpy(np.array([[100_000]], np.int32))
        client.async_stream_infer("Slow", [inp])
        assert not isinstance(first.get(timeout=_WAIT_S), Exception)
        client.stop_stream(cancel_requests=True)
    finally:
        client.close()

    # The generator is closed long before its 100000 steps.
    assert probe.closed.wait(_WAIT_S), "the callable's generator was never closed"
    assert probe.closed_count == 1
    assert probe.steps < 100_000

    # One instance: the next request is served only because the first one ended.
    probe.closed.clear()
    assert _stream_once(grpc_url, "Slow", 3) == [0, 1, 2]
    assert probe.closed_count == 2


# A client process that opens a stream, reads one response, says so, then waits to be killed.
_CLIENT = """
import sys, time, queue
import numpy as np
import tritonclient.grpc as grpcclient
got = queue.Queue()
client = grpcclient.InferenceServerClient(sys.argv[1])
client.start_stream(callback=lambda result, error: got.put(error or result))
inp = grpcclient.InferInput("count", [1, 1], "INT32")
inp.set_data_from_numpy(np.array([[100000]], np.int32))
client.async_stream_infer("Slow", [inp])
got.get(timeout=60)
print("first", flush=True)
time.sleep(120)
"""


def test_a_client_that_dies_closes_the_generator(triton: Triton) -> None:
    """No cancel from the client: its process is killed mid-stream, its connection drops."""
    probe = _Probe()
    config = ModelConfig(max_batch_size=4, decoupled=True)
    triton.bind("Slow", _slow_stream(probe), **IO, config=config)  # type: ignore[arg-type]
    triton.run()
    grpc_url = urls(triton)[1].removeprefix("grpc://")
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, grpc_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "first"
    finally:
        proc.kill()
        proc.wait(_WAIT_S)
        if proc.stdout is not None:
            proc.stdout.close()
    assert probe.closed.wait(_WAIT_S), "the callable's generator was never closed"
    assert probe.steps < 100_000
    assert _stream_once(grpc_url, "Slow", 2) == [0, 1]


def test_is_cancelled_visible_to_the_callable(triton: Triton) -> None:
    """A plain (non-decoupled) callable polls ``request.is_cancelled()`` while it works;
    count 0 asks it to work until cancelled, any other count is answered at once."""
    probe = _Probe()

    def infer(requests: List[Request]) -> List[Dict[str, np.ndarray]]:
        if int(requests[0]["count"].reshape(-1)[0]) == 0:
            probe.cancelled_seen.append(requests[0].is_cancelled())
            probe.started.set()
            deadline = time.monotonic() + _WAIT_S
            while not requests[0].is_cancelled() and time.monotonic() < deadline:
                time.sleep(0.01)
            probe.cancelled_seen.append(requests[0].is_cancelled())
            probe.closed.set()
        return [{"step": r["count"]} for r in requests]

    triton.bind("Polls", infer, **IO, config=ModelConfig(max_batch_size=4))  # type: ignore[arg-type]
    triton.run()
    grpc_url = urls(triton)[1].removeprefix("grpc://")

    with grpcclient.InferenceServerClient(grpc_url) as client:
        inp = grpcclient.InferInput("count", [1, 1], "INT32")
        inp.set_data_from_numpy(np.array([[0]], np.int32))
        future = client.async_infer("Polls", [inp], callback=lambda result, error: None)
        assert probe.started.wait(_WAIT_S)
        future.cancel()
        assert probe.closed.wait(_WAIT_S), "the callable never returned"
        assert probe.cancelled_seen == [False, True]

        # The instance is free again: the next request is answered.
        inp.set_data_from_numpy(np.array([[7]], np.int32))
        result = client.infer("Polls", [inp], client_timeout=_WAIT_S)
        assert int(result.as_numpy("step").reshape(-1)[0]) == 7


def test_request_built_by_hand_is_not_cancelled() -> None:
    assert Request(data={}).is_cancelled() is False
    assert Request(data={}, _cancelled=lambda: True).is_cancelled() is True
