"""PyTriton's clients with ``access_token=``, through the real tritonserver restricted by
``TritonSecurityConfig``: the token travels as the ``triton-access-token`` HTTP header or
the ``triton-grpc-protocol-triton-access-token`` gRPC metadata on every call a client makes
(readiness, model config, inference, streams, load/unload), so a client with the right
token works where one without it gets the server's refusal."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from integration_support.pytriton_helpers import loopback_config, urls
from pybackend.pytriton.client import (
    AsyncioDecoupledModelClient,
    AsyncioModelClient,
    DecoupledModelClient,
    FuturesModelClient,
    ModelClient,
    PyTritonClientInferenceServerError,
    PyTritonClientTimeoutError,
)
from pybackend.pytriton.decorators import batch
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton, TritonSecurityConfig

TOKEN = "s3cret"
#: Every group a client calls: readiness, config, inference, load/unload.
RESTRICTED = ["health", "model-config", "inference", "model-repository"]
IO = {
    "inputs": [Tensor(name="x", dtype=np.int32, shape=(1,))],
    "outputs": [Tensor(name="y", dtype=np.int32, shape=(1,))],
}
BATCHING = ModelConfig(max_batch_size=4)
#: tritonserver's refusal of a restricted endpoint, as the clients pass it on.
REFUSED = "is restricted, expecting header '(triton-grpc-protocol-)?triton-access-token'"
#: The models are ready before the clients start: a client without the token fails soon.
WAIT_S = 30.0


@batch
def _add_one(x: np.ndarray) -> Dict[str, np.ndarray]:
    return {"y": x + 1}


def _count(requests: List[Any]) -> Iterator[List[Dict[str, np.ndarray]]]:
    for step in range(int(requests[0]["x"][0][0])):
        yield [{"y": np.array([[step]], np.int32)} for _ in requests]


@pytest.fixture
def guarded() -> Iterator[Triton]:
    security = TritonSecurityConfig(access_token=TOKEN, restricted_endpoints=RESTRICTED)
    t = Triton(config=loopback_config(), security_config=security)
    try:
        t.bind("Add", _add_one, **IO, config=BATCHING)  # type: ignore[arg-type]
        t.bind("Count", _count, **IO, config=ModelConfig(max_batch_size=4, decoupled=True))  # type: ignore[arg-type]
        t.run()
        yield t
    finally:
        t.stop()


def _y(result: Dict[str, np.ndarray]) -> int:
    return int(result["y"][0])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_model_client_sends_the_token(guarded: Triton, protocol: str) -> None:
    url = urls(guarded)[0 if protocol == "http" else 1]
    x = np.array([1], np.int32)
    with ModelClient(
        url, "Add", access_token=TOKEN, init_timeout_s=WAIT_S, lazy_init=False
    ) as client:
        config = client.model_config  # readiness and model-config went with the token
        assert _y(client.infer_sample(x)) == 2
        assert client.infer_batch(x[np.newaxis])["y"].tolist() == [[2]]
        # The caller's own headers travel with the token.
        assert _y(client.infer_sample(x, headers={"x-extra": "1"})) == 2
        client.unload_model()
        client.load_model()  # model-repository, with the token
        assert _y(client.infer_sample(x)) == 2

    # Without the token, each restricted group refuses with tritonserver's error (over
    # HTTP tritonclient reads a refused readiness probe as "not ready").
    not_ready = REFUSED if protocol == "grpc" else "timed out"
    with ModelClient(url, "Add", init_timeout_s=0.5) as client:
        with pytest.raises(PyTritonClientTimeoutError, match=not_ready):
            client.wait_for_model(0.5)  # health
    # (model-config is not reached without the token: reading the configuration waits for
    # the model first, as PyTriton's does, and health refuses.)
    with ModelClient(url, "Add", model_config=config, ensure_model_is_ready=False) as client:
        with pytest.raises(PyTritonClientInferenceServerError, match=REFUSED):
            client.infer_sample(x)
        with pytest.raises(InferenceServerException, match=REFUSED):
            client.unload_model()
    with ModelClient(
        url, "Add", access_token="wrong", model_config=config, ensure_model_is_ready=False
    ) as client:
        with pytest.raises(PyTritonClientInferenceServerError, match=REFUSED):
            client.infer_sample(x)

    # FuturesModelClient and AsyncioModelClient pass the token to their clients.
    with FuturesModelClient(url, "Add", access_token=TOKEN, init_timeout_s=WAIT_S) as futures:
        assert _y(futures.infer_sample(x).result()) == 2
        assert futures.model_config().result().max_batch_size == 4
    with FuturesModelClient(url, "Add") as futures:
        with pytest.raises(PyTritonClientTimeoutError, match=not_ready):
            futures.wait_for_model(0.5).result()

    async def asyncio_clients() -> None:
        async with AsyncioModelClient(
            url, "Add", access_token=TOKEN, init_timeout_s=WAIT_S
        ) as client:
            assert _y(await client.infer_sample(x)) == 2
        async with AsyncioModelClient(url, "Add", init_timeout_s=0.5) as client:
            with pytest.raises(PyTritonClientTimeoutError, match=not_ready):
                await client.infer_sample(x)

    asyncio.run(asyncio_clients())


def test_decoupled_clients_send_the_token(guarded: Triton) -> None:
    url = urls(guarded)[1]
    x = np.array([3], np.int32)
    with DecoupledModelClient(url, "Count", access_token=TOKEN, init_timeout_s=WAIT_S) as client:
        assert [_y(r) for r in client.infer_sample(x)] == [0, 1, 2]
        config = client.model_config
    # Without the token the stream's request is refused by the server.
    with DecoupledModelClient(
        url, "Count", model_config=config, ensure_model_is_ready=False
    ) as client:
        with pytest.raises(PyTritonClientInferenceServerError, match=REFUSED):
            list(client.infer_sample(x))

    async def asyncio_clients() -> None:
        async with AsyncioDecoupledModelClient(
            url, "Count", access_token=TOKEN, init_timeout_s=WAIT_S
        ) as client:
            assert [_y(r) async for r in client.infer_sample(x)] == [0, 1, 2]
        async with AsyncioDecoupledModelClient(
            url, "Count", model_config=config, ensure_model_is_ready=False
        ) as client:
            with pytest.raises(PyTritonClientInferenceServerError, match=REFUSED):
                _ = [r async for r in client.infer_sample(x)]

    asyncio.run(asyncio_clients())
