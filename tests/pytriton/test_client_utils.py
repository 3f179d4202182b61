"""``pybackend.pytriton.client.utils`` through the real tritonserver, over HTTP and gRPC:
PyTriton 0.7's helpers with its results, warnings and errors. Every expected value here
was first observed side by side with NVIDIA's ``pytriton.client.utils`` (from
``.venv-pytriton``) against the same server; the two printed the same lines."""

from __future__ import annotations

import socket
import warnings
from typing import Iterator, Tuple

import numpy as np
import pytest
import tritonclient.grpc
import tritonclient.http
from tritonclient.utils import InferenceServerException

from integration_support.pytriton_helpers import loopback_config, urls
from pybackend.pytriton.client.auth import create_auth_headers
from pybackend.pytriton.client.exceptions import (
    PyTritonClientInvalidUrlError,
    PyTritonClientTimeoutError,
)
from pybackend.pytriton.client.utils import (
    ModelState,
    TritonUrl,
    create_client_from_url,
    get_model_config,
    get_model_state,
    wait_for_model_ready,
    wait_for_server_ready,
)
from pybackend.pytriton.client.warnings import NotSupportedTimeoutWarning
from pybackend.pytriton.decorators import batch
from pybackend.pytriton.model_config import DeviceKind, DynamicBatcher, ModelConfig, Tensor
from pybackend.pytriton.model_config.triton_model_config import TensorSpec, TritonModelConfig
from pybackend.pytriton.triton import Triton


@pytest.mark.parametrize(
    "url, parsed",
    [
        ("localhost:8000", ("http", "localhost", 8000)),
        ("localhost", ("http", "localhost", 8000)),
        ("h:1", ("http", "h", 1)),
        ("grpc://localhost", ("grpc", "localhost", 8001)),
        ("GRPC://h:5", ("grpc", "h", 5)),
        ("http://h:1", ("http", "h", 1)),
        ("[::1]:8001", ("http", "::1", 8001)),
        ("grpc://", ("http", "grpc", 8000)),  # no host: PyTriton reads the scheme as one
    ],
)
def test_triton_url_parses_as_pytriton(url: str, parsed: Tuple[str, str, int]) -> None:
    t = TritonUrl.from_url(url)
    assert (t.scheme, t.hostname, t.port) == parsed
    assert t.with_scheme == f"{parsed[0]}://{parsed[1]}:{parsed[2]}"
    assert t.without_scheme == f"{parsed[1]}:{parsed[2]}"


@pytest.mark.parametrize(
    "url, text, cause",
    [
        ("ftp://h", "Invalid url ftp://h", "Invalid scheme ftp. Only grpc and http"),
        ("http://h:port", "Invalid url http://h:port", "Port could not be cast"),
        (123, "Invalid url 123. Url must be a string.", None),
    ],
)
def test_triton_url_refuses_as_pytriton(url: object, text: str, cause: object) -> None:
    with pytest.raises(PyTritonClientInvalidUrlError) as raised:
        TritonUrl.from_url(url)
    assert raised.value.message == text
    assert (cause is None) == (raised.value.__cause__ is None)
    assert cause is None or str(cause) in str(raised.value.__cause__)


def test_create_client_from_url() -> None:
    # No server needed: tritonclient connects on first use.
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # HTTP warns of nothing
        http = create_client_from_url("localhost:1234")
        timed = create_client_from_url("http://localhost:1234", network_timeout_s=5)
    assert isinstance(http, tritonclient.http.InferenceServerClient)
    pool = timed._client_stub._connection_pool
    assert (pool.network_timeout, pool.connection_timeout) == (5, 5)
    with pytest.warns(NotSupportedTimeoutWarning) as caught:
        grpc = create_client_from_url("grpc://localhost:1234", network_timeout_s=5)
    assert isinstance(grpc, tritonclient.grpc.InferenceServerClient)
    assert str(caught[0].message) == (
        "tritonclient.grpc doesn't support timeout for other commands than infer. "
        "Ignoring network_timeout: 5."
    )
    with pytest.raises(PyTritonClientInvalidUrlError):
        create_client_from_url("ftp://localhost")


@batch
def _double(x: np.ndarray, s: np.ndarray) -> dict:
    return {"y": x * 2, "t": s}


@pytest.fixture(scope="module")
def served() -> Iterator[Tuple[str, str, str]]:
    """(http url, grpc url, access token) of a Triton serving model "m"."""
    with Triton(config=loopback_config()) as t:
        t.bind(
            "m",
            _double,
            [
                Tensor(name="x", dtype=np.float32, shape=(-1,)),
                Tensor(name="s", dtype=bytes, shape=(1,), optional=True),
            ],
            [
                Tensor(name="y", dtype=np.float32, shape=(-1,)),
                Tensor(name="t", dtype=bytes, shape=(1,)),
            ],
            config=ModelConfig(
                max_batch_size=8,
                batcher=DynamicBatcher(
                    max_queue_delay_microseconds=100, preferred_batch_size=[2, 4]
                ),
            ),
        )
        t.run()
        token = t.get_access_token()
        assert token
        yield (*urls(t), token)


# Short waits over HTTP warn (see the next test); the warning is not this test's subject.
@pytest.mark.filterwarnings("ignore::pybackend.pytriton.client.warnings.NotSupportedTimeoutWarning")
@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_waits_state_and_config(served: Tuple[str, str, str], scheme: str) -> None:
    url = served[0] if scheme == "http" else served[1]
    client = create_client_from_url(url)
    wait_for_server_ready(client)
    wait_for_model_ready(client, "m")
    wait_for_model_ready(client, "m", "1", timeout_s=30)
    with pytest.raises(PyTritonClientTimeoutError) as raised:
        wait_for_model_ready(client, "nope", timeout_s=0.3)
    assert raised.value.message == "Waiting for model nope/<latest> to be ready timed out."
    with pytest.raises(PyTritonClientTimeoutError) as raised:
        wait_for_model_ready(client, "m", "7", timeout_s=0.3)
    assert raised.value.message == "Waiting for model m/7 to be ready timed out."

    # The repository index is restricted by Triton's default security config.
    headers = create_auth_headers(served[2], scheme)
    assert get_model_state(client, "m", headers=headers) is ModelState.READY
    assert get_model_state(client, "m", "1", headers=headers) is ModelState.READY
    assert get_model_state(client, "m", "2", headers=headers) is ModelState.UNAVAILABLE
    assert get_model_state(client, "nope", headers=headers) is ModelState.UNAVAILABLE
    with pytest.raises(InferenceServerException, match="restricted"):
        get_model_state(client, "m")

    config = get_model_config(client, "m", timeout_s=30)
    assert isinstance(config, TritonModelConfig)
    assert (config.model_name, config.model_version, config.max_batch_size) == ("m", 1, 8)
    assert config.batching and not config.decoupled and config.backend == "python"
    assert config.batcher == DynamicBatcher(
        max_queue_delay_microseconds=100, preferred_batch_size=[2, 4]
    )
    assert config.instance_group == {DeviceKind.KIND_CPU: 1}
    assert config.inputs == [
        TensorSpec("x", (-1,), np.float32, False),
        TensorSpec("s", (1,), np.bytes_, True),
    ]
    assert config.outputs == [
        TensorSpec("y", (-1,), np.float32, False),
        TensorSpec("t", (1,), np.bytes_, False),
    ]
    assert config.response_cache is None and config.model_warmup is None
    with pytest.raises(PyTritonClientTimeoutError, match="nope/<latest>"):
        get_model_config(client, "nope", timeout_s=0.3)


def test_http_wait_warns_of_a_longer_network_timeout(served: Tuple[str, str, str]) -> None:
    # PyTriton's warning: one probe (60 s network timeout) may outlast a 2 s wait.
    client = create_client_from_url(served[0])
    with pytest.warns(NotSupportedTimeoutWarning, match="timeout_s=2"):
        wait_for_server_ready(client, timeout_s=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wait_for_server_ready(client, timeout_s=60)


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_no_server_times_out(scheme: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotSupportedTimeoutWarning)
        client = create_client_from_url(f"{scheme}://127.0.0.1:{port}")
        with pytest.raises(PyTritonClientTimeoutError) as raised:
            wait_for_server_ready(client, timeout_s=0.3)
        assert raised.value.message == "Waiting for server to be ready timed out."
        with pytest.raises(PyTritonClientTimeoutError, match="server to be ready"):
            wait_for_model_ready(client, "m", timeout_s=0.3)
