"""PyTriton's client options through the real tritonserver, as PyTriton 0.7.0 gives them
meaning (the signatures themselves: test_client_signatures.py): ``model_config=`` and
``ensure_model_is_ready=`` (a given configuration, and whether the first inference waits for
the model), ``lazy_init=False`` on the asyncio client, ``await client.model_config`` and
``wait_for_model``, ``from_existing_client``, ``get_lib``/``create_client_from_url``, the
FuturesModelClient's queue (``max_queue_size``, ``non_blocking``) and the checks of a
call's arguments."""

from __future__ import annotations

import asyncio
import threading
from typing import Dict, Iterator

import numpy as np
import pytest
import tritonclient.grpc
import tritonclient.grpc.aio
import tritonclient.http

from integration_support.pytriton_helpers import loopback_config, urls
from pybackend.pytriton.client import (
    AsyncioModelClient,
    DecoupledModelClient,
    FuturesModelClient,
    ModelClient,
    PyTritonClientClosedError,
    PyTritonClientInferenceServerError,
    PyTritonClientQueueFullError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from pybackend.pytriton.decorators import batch
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton

IO = {
    "inputs": [Tensor(name="x", dtype=np.int32, shape=(1,))],
    "outputs": [Tensor(name="y", dtype=np.int32, shape=(1,))],
}
X = np.array([1], np.int32)
#: A bound on waits for a model that is not there: the answer is "not ready" however long.
SHORT_S = 1.0
STARTED = threading.Event()  # the gated model is inside its callable
GATE = threading.Event()  # lets it return


@batch
def _add_one(x: np.ndarray) -> Dict[str, np.ndarray]:
    return {"y": x + 1}


@batch
def _gated(x: np.ndarray) -> Dict[str, np.ndarray]:
    STARTED.set()
    GATE.wait(60)
    return {"y": x + 1}


@pytest.fixture(scope="module")
def served() -> Iterator[Triton]:
    t = Triton(config=loopback_config())
    try:
        t.bind("Add", _add_one, **IO, config=ModelConfig(max_batch_size=4))  # type: ignore[arg-type]
        t.bind("Gate", _gated, **IO, config=ModelConfig(max_batch_size=4))  # type: ignore[arg-type]
        t.run()
        yield t
    finally:
        GATE.set()
        t.stop()


def _y(result: Dict[str, np.ndarray]) -> int:
    return int(np.asarray(result["y"]).reshape(-1)[0])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_model_config_and_ensure_model_is_ready(served: Triton, protocol: str) -> None:
    url = urls(served)[0 if protocol == "http" else 1]
    # model-repository is restricted by default (PyTriton's random token).
    with ModelClient(url, "Add", access_token=served.get_access_token()) as admin:
        config = admin.model_config
        admin.unload_model()
        try:
            _while_unloaded(url, config)
        finally:
            admin.load_model()

    async def loaded() -> None:
        async with AsyncioModelClient(url, "Add", lazy_init=False) as client:
            await client.wait_for_model(SHORT_S)
            assert (await client.model_config).max_batch_size == 4
            assert _y(await client.infer_sample(X)) == 2
            assert _y(await client.infer_batch(X[np.newaxis])) == 2
            async with AsyncioModelClient.from_existing_client(client) as copy:
                assert (await copy.model_config).max_batch_size == 4
                assert _y(await copy.infer_sample(x=X)) == 2

    asyncio.run(loaded())


def _while_unloaded(url: str, config: object) -> None:
    # A given configuration without ensure_model_is_ready: nothing waits, the inference
    # meets the missing model at once.
    with ModelClient(url, "Add", model_config=config, ensure_model_is_ready=False) as client:
        assert client.model_config is config
        with pytest.raises(PyTritonClientInferenceServerError, match="Add"):
            client.infer_sample(X)
    # With it (the default), the first inference waits for the model first.
    with ModelClient(url, "Add", model_config=config, init_timeout_s=SHORT_S) as client:
        with pytest.raises(PyTritonClientTimeoutError, match="Add"):
            client.infer_sample(X)

    async def asyncio_clients() -> None:
        given = AsyncioModelClient(url, "Add", model_config=config, ensure_model_is_ready=False)
        async with given as client:
            assert (await client.model_config) is config
            with pytest.raises(PyTritonClientInferenceServerError, match="Add"):
                await client.infer_sample(X)
        async with AsyncioModelClient(
            url, "Add", model_config=config, init_timeout_s=SHORT_S
        ) as client:
            with pytest.raises(PyTritonClientTimeoutError, match="Add"):
                await client.infer_sample(X)
        # lazy_init=False: entering waits for the model and reads its configuration.
        with pytest.raises(PyTritonClientTimeoutError, match="Add"):
            async with AsyncioModelClient(url, "Add", lazy_init=False, init_timeout_s=SHORT_S):
                pass
        async with AsyncioModelClient(url, "Add") as client:  # lazy: nothing asked yet
            with pytest.raises(PyTritonClientTimeoutError, match="Add"):
                await client.wait_for_model(SHORT_S)

    asyncio.run(asyncio_clients())


@pytest.mark.timeout(120)
def test_existing_clients_libraries_and_argument_checks(served: Triton) -> None:
    http_url, grpc_url = urls(served)
    with ModelClient(grpc_url, "Add", lazy_init=False) as client:
        assert client.get_lib() is tritonclient.grpc
        with ModelClient.from_existing_client(client) as copy:  # gRPC still, config kept
            assert copy.get_lib() is tritonclient.grpc
            assert copy.model_config is client.model_config
            assert _y(copy.infer_sample(X)) == 2
        raw = client.create_client_from_url(http_url)
        try:
            assert isinstance(raw, tritonclient.http.InferenceServerClient)
            assert raw.is_model_ready("Add")
        finally:
            raw.close()
        with pytest.raises(PyTritonClientValueError, match="Provide input data"):
            client.infer_sample()
        with pytest.raises(PyTritonClientValueError, match="either positional either keyword"):
            client.infer_sample(X, x=X)
        with pytest.raises(PyTritonClientValueError, match="must be a string, integer or bool"):
            client.infer_sample(X, parameters={"scale": 1.5})
        with pytest.raises(PyTritonClientValueError, match="must be a dictionary"):
            client.infer_batch(X[np.newaxis], headers=[("a", "b")])  # type: ignore[arg-type]
    assert AsyncioModelClient(grpc_url, "Add").get_lib() is tritonclient.grpc.aio
    # Refused before anything is asked of the server (nothing listens on port 1).
    with pytest.raises(PyTritonClientValueError, match="only supported for grpc"):
        DecoupledModelClient("http://127.0.0.1:1", "Add", lazy_init=False)


@pytest.mark.timeout(120)
def test_futures_client_queue(served: Triton) -> None:
    url = urls(served)[1]
    with pytest.raises(ValueError, match="max_workers must be greater than 0"):
        FuturesModelClient(url, "Gate", max_workers=0)
    with pytest.raises(ValueError, match="max_queue_size must be greater than 0"):
        FuturesModelClient(url, "Gate", max_queue_size=0)
    STARTED.clear()
    GATE.clear()
    client = FuturesModelClient(url, "Gate", max_workers=1, max_queue_size=1, non_blocking=True)
    with client:
        first = client.infer_sample(X)
        assert STARTED.wait(60)  # the one thread runs the first call
        second = client.infer_sample(X)  # waits in the queue: its one place
        with pytest.raises(PyTritonClientQueueFullError, match="Queue is full"):
            client.infer_sample(X)
        GATE.set()
        assert _y(first.result(60)) == 2 and _y(second.result(60)) == 2
    with pytest.raises(PyTritonClientClosedError, match="already closed"):
        client.infer_sample(X)
    # No limits: max_workers=None and max_queue_size=None are PyTriton's "unbounded".
    with FuturesModelClient(url, "Add", max_workers=None, max_queue_size=None) as unbounded:
        futures = [unbounded.infer_sample(X) for _ in range(4)]
        assert [_y(f.result(60)) for f in futures] == [2, 2, 2, 2]
