"""AsyncioDecoupledModelClient through the real tritonserver: responses of a decoupled
callable arrive in order via ``async for``, errors mid-stream are PyTriton's exceptions, and
a consumer that stops early (break or cancellation) leaves the server and client usable."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List

import numpy as np
import pytest

from integration_support.pytriton_helpers import urls
from pybackend.pytriton.client import (
    AsyncioDecoupledModelClient,
    PyTritonClientInferenceServerError,
    PyTritonClientValueError,
)
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton

IO = {
    "inputs": [Tensor(name="count", dtype=np.int32, shape=(1,))],
    "outputs": [Tensor(name="step", dtype=np.int32, shape=(1,))],
}
DECOUPLED = ModelConfig(max_batch_size=4, decoupled=True)


def _slow_count(requests):
    """As many responses as `count`, each after a short pause (time for the loop to run)."""
    n = int(requests[0]["count"].reshape(-1)[0])
    for i in range(n):
        time.sleep(0.05)
        yield [{"step": np.array([[i]], np.int32)} for _ in requests]


def _fails_midway(requests):
    yield [{"step": np.array([[1]], np.int32)} for _ in requests]
    yield [{"step": np.array([[2]], np.int32)} for _ in requests]
    raise ValueError("stream broke after two responses")


def _serve(triton: Triton, name: str, fn: Any) -> str:
    triton.bind(name, fn, **IO, config=DECOUPLED)  # type: ignore[arg-type]
    triton.run()
    return urls(triton)[1]


async def _steps(stream: Any) -> List[int]:
    return [int(np.asarray(r["step"]).reshape(-1)[0]) async for r in stream]


def _stream_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pytriton-async-stream")]


@pytest.mark.parametrize("method", ["infer_sample", "infer_batch"])
def test_responses_in_order_without_blocking_the_loop(triton: Triton, method: str) -> None:
    url = _serve(triton, "Count", _slow_count)
    count = np.array([5], np.int32)
    args = (count,) if method == "infer_sample" else (count[np.newaxis],)

    async def main() -> tuple[List[int], List[int]]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        steps: List[int] = []
        ticks_seen: List[int] = []  # the ticker's count as each response arrives
        async with AsyncioDecoupledModelClient(url, "Count") as client:
            async for r in getattr(client, method)(*args):
                steps.append(int(np.asarray(r["step"]).reshape(-1)[0]))
                ticks_seen.append(ticks)
        tick_task.cancel()
        return steps, ticks_seen

    steps, ticks_seen = asyncio.run(main())
    assert steps == [0, 1, 2, 3, 4]
    # The loop kept running while the stream waited for its later responses.
    assert ticks_seen[-1] > ticks_seen[0]


def test_error_mid_stream_after_the_responses_before_it(triton: Triton) -> None:
    url = _serve(triton, "Broken", _fails_midway)
    got: List[int] = []

    async def main() -> None:
        async with AsyncioDecoupledModelClient(url, "Broken") as client:
            async for r in client.infer_sample(count=np.array([1], np.int32)):
                got.append(int(r["step"][0]))

    with pytest.raises(PyTritonClientInferenceServerError) as info:
        asyncio.run(main())
    assert got == [1, 2]
    assert "ValueError: stream broke after two responses" in str(info.value)


def test_stopping_early_leaves_the_server_and_client_usable(triton: Triton) -> None:
    url = _serve(triton, "Count", _slow_count)

    async def main() -> tuple[List[int], List[int], List[int]]:
        async with AsyncioDecoupledModelClient(url, "Count") as client:
            # break out after two of twenty responses, closing the stream
            stream = client.infer_sample(np.array([20], np.int32))
            first: List[int] = []
            async for r in stream:
                first.append(int(r["step"][0]))
                if len(first) == 2:
                    break
            await stream.aclose()  # type: ignore[attr-defined]
            # cancel a consumer while it waits for a response
            task = asyncio.create_task(_steps(client.infer_sample(np.array([20], np.int32))))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            after = await _steps(client.infer_sample(np.array([3], np.int32)))
            concurrent = await asyncio.gather(
                _steps(client.infer_sample(np.array([2], np.int32))),
                _steps(client.infer_sample(np.array([2], np.int32))),
            )
        return first, after, [len(c) for c in concurrent]

    first, after, concurrent = asyncio.run(main())
    assert first == [0, 1]
    assert after == [0, 1, 2]
    assert concurrent == [2, 2]
    # Each stream's thread ends once its stream is closed (the cancelled one after its
    # pending response arrives).
    deadline = time.monotonic() + 10
    while _stream_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _stream_threads() == []


def test_http_url_is_refused_like_pytriton() -> None:
    async def main() -> None:
        client = AsyncioDecoupledModelClient("http://127.0.0.1:1", "Any")
        async for _ in client.infer_sample(np.array([1], np.int32)):
            pass

    with pytest.raises(PyTritonClientValueError, match="only supported for grpc protocol"):
        asyncio.run(main())
