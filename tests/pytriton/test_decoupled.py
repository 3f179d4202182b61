"""Decoupled models (generators and async generators yield one list of response dicts per
step), coroutines, and errors in the middle of a stream, through the real tritonserver."""

from __future__ import annotations

import asyncio

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
