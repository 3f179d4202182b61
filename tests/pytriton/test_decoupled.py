"""Decoupled models (generators and async generators yield one list of response dicts per
step), coroutines, and errors in the middle of a stream, through the real tritonserver."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

from integration_support.pytriton_helpers import urls
from pybackend.pytriton.client import (
    DecoupledModelClient,
    ModelClient,
    PyTritonClientInferenceServerError,
)
from pybackend.pytriton.decorators import batch
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton

IO = {
    "inputs": [Tensor(name="count", dtype=np.int32, shape=(1,))],
    "outputs": [Tensor(name="step", dtype=np.int32, shape=(1,))],
}


def _count(requests):
    """One response per step, as many steps as the request's `count`."""
    n = int(requests[0]["count"].reshape(-1)[0])
    for i in range(n):
        yield [{"step": np.array([[i]], np.int32)} for _ in requests]


async def _count_async(requests):
    n = int(requests[0]["count"].reshape(-1)[0])
    for i in range(n):
        await asyncio.sleep(0)
        yield [{"step": np.array([[i * 10]], np.int32)} for _ in requests]


def _fails_midway(requests):
    yield [{"step": np.array([[7]], np.int32)} for _ in requests]
    raise ValueError("stream broke after one response")


@pytest.mark.parametrize(
    "fn,expected", [(_count, [0, 1, 2]), (_count_async, [0, 10, 20])], ids=["gen", "asyncgen"]
)
def test_decoupled_stream(triton: Triton, fn: object, expected: list) -> None:
    triton.bind("Count", fn, **IO, config=ModelConfig(max_batch_size=4, decoupled=True))  # type: ignore[arg-type]
    triton.run()
    with DecoupledModelClient(urls(triton)[1], "Count") as client:
        steps = [int(r["step"][0]) for r in client.infer_sample(np.array([3], np.int32))]
    assert steps == expected


def test_decoupled_error_after_first_response(triton: Triton) -> None:
    triton.bind("Broken", _fails_midway, **IO, config=ModelConfig(max_batch_size=4, decoupled=True))  # type: ignore[arg-type]
    triton.run()
    got = []
    with DecoupledModelClient(urls(triton)[1], "Broken") as client:
        with pytest.raises(PyTritonClientInferenceServerError) as info:
            for r in client.infer_sample(np.array([1], np.int32)):
                got.append(int(r["step"][0]))
    assert got == [7]
    # The traceback of the callable travels with the error.
    assert "ValueError: stream broke after one response" in str(info.value)
    assert "_fails_midway" in str(info.value)


@batch
async def _async_double(count):
    await asyncio.sleep(0)
    return {"step": count * 2}


def test_coroutine_callable(triton: Triton) -> None:
    async def double(requests):
        await asyncio.sleep(0)
        return [{"step": r["count"] * 2} for r in requests]

    triton.bind("Double", double, **IO, config=ModelConfig(max_batch_size=4))  # type: ignore[arg-type]
    triton.run()
    with ModelClient(urls(triton)[0], "Double") as client:
        assert int(client.infer_sample(np.array([21], np.int32))["step"][0]) == 42


class _Endless:
    """A stream far longer than any test waits for; `closed` is set when its generator is
    closed (GeneratorExit at its yield) or ends."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def __call__(self, requests: List[Any]) -> Iterator[List[Dict[str, np.ndarray]]]:
        try:
            n = int(requests[0]["count"].reshape(-1)[0])
            for i in range(n):
                time.sleep(0.01)
                yield [{"step": np.array([[i]], np.int32)} for _ in requests]
        finally:
            self.closed.set()


def test_leaving_the_loop_early_cancels_the_stream(triton: Triton) -> None:
    """Breaking out of DecoupledModelClient's iteration cancels the request (PyTriton 0.7's
    client hangs there, or hands the old stream's responses to the next call): the server's
    generator is closed, and the same client streams again."""
    endless = _Endless()
    triton.bind("Endless", endless, **IO, config=ModelConfig(max_batch_size=4, decoupled=True))
    triton.run()
    first: List[int] = []
    left = threading.Event()

    def consume() -> None:
        with DecoupledModelClient(urls(triton)[1], "Endless", inference_timeout_s=60) as client:
            for r in client.infer_sample(np.array([1_000_000], np.int32)):
                first.append(int(r["step"][0]))
                if len(first) == 2:
                    break
            left.set()  # the stream is closed by now
            first.extend(int(r["step"][0]) for r in client.infer_sample(np.array([3], np.int32)))

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    assert left.wait(60), "leaving the loop waited for the whole stream"
    assert endless.closed.wait(60), "the server's generator was never closed"
    worker.join(60)
    assert not worker.is_alive()
    assert first == [0, 1, 0, 1, 2]
