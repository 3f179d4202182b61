"""PyTriton's server options beyond the defaults, through the real tritonserver:
``ModelConfig(model_warmup=...)`` (Triton runs it through the bound callable at load),
``TritonConfig(allow_http=False)`` (readiness and loading over gRPC) and
``TritonSecurityConfig`` (an access token on the restricted endpoints)."""

from __future__ import annotations

import http.client
import logging
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from integration_support.pytriton_helpers import loopback_config, urls
from pybackend.pytriton.client import ModelClient, PyTritonClientInferenceServerError
from pybackend.pytriton.exceptions import (
    PyTritonBadParameterError,
    PyTritonRuntimeError,
    PyTritonValidationError,
)
from pybackend.pytriton.model_config import ModelConfig, ModelWarmup, Tensor, WarmupInput
from pybackend.pytriton.proxy.types import Request
from pybackend.pytriton.triton import RemoteTriton, Triton, TritonSecurityConfig
from pybackend.server import TritonServer

IO = {
    "inputs": [Tensor(name="x", dtype=np.float32, shape=(3,))],
    "outputs": [Tensor(name="y", dtype=np.float32, shape=(3,))],
}
TOKEN_HEADER = "triton-access-token"
GRPC_TOKEN_HEADER = "triton-grpc-protocol-triton-access-token"


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.calls: List[List[list]] = []  # per call, each request's x
        self.fail = fail

    def __call__(self, requests: List[Request]) -> List[Dict[str, np.ndarray]]:
        self.calls.append([r["x"].tolist() for r in requests])
        if self.fail:
            raise RuntimeError("warmup broke the model")
        return [{"y": r["x"] + 1} for r in requests]


def _status(http_url: str, method: str, path: str, headers: Dict[str, str]) -> int:
    host, port = http_url.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=b"{}" if method == "POST" else None, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


# ---------------------------------------------------------------------- model_warmup


def test_model_warmup_runs_through_the_callable_at_load(triton: Triton, tmp_path: Path) -> None:
    sample = np.array([1.5, 2.5, 3.5], np.float32)
    np.save(tmp_path / "x.npy", sample)
    model = Recorder()
    config = ModelConfig(
        max_batch_size=4,
        model_warmup=[
            ModelWarmup("zeros", 2, {"x": WarmupInput(np.float32, (3,), zero_data=True)}, 2),
            ModelWarmup(
                "file",
                1,
                {"x": WarmupInput(np.float32, (3,), input_data_file=str(tmp_path / "x.npy"))},
                1,
            ),
        ],
    )
    triton.bind("Warm", model, **IO, config=config)
    triton.run()
    # Loaded means warmed up: Triton ran the samples before it reported the model ready,
    # batch_size requests of one sample per execution, count executions per sample.
    zeros = [[[0.0] * 3], [[0.0] * 3]]
    assert model.calls == [zeros, zeros, [[sample.tolist()]]]
    with ModelClient(urls(triton)[0], "Warm") as client:
        client.infer_sample(np.zeros(3, np.float32))
    assert len(model.calls) == 4


def test_a_failing_warmup_is_logged_and_the_model_loads(
    triton: Triton, caplog: pytest.LogCaptureFixture
) -> None:
    """As PyTriton 0.7: a warmup error is a warning. (Failing Triton's warmup sample fails
    the load, and tritonserver 2.51 then often dies of SIGSEGV, with NVIDIA's backend too.)"""
    config = ModelConfig(
        model_warmup=[ModelWarmup("w", 1, {"x": WarmupInput(np.float32, (3,), zero_data=True)}, 0)]
    )
    model = Recorder(fail=True)
    triton.bind("ColdFeet", model, **IO, config=config)
    with caplog.at_level(logging.WARNING, logger="pybackend.pytriton"):
        triton.run()
    assert model.calls == [[[[0.0] * 3]]]  # count 0: the sample ran once
    assert "Warmup of model `ColdFeet` failed" in caplog.text
    assert "RuntimeError: warmup broke the model" in caplog.text
    server = triton.server
    assert server is not None and server.is_alive()
    # Later requests are real ones: their errors reach the client.
    with ModelClient(urls(triton)[0], "ColdFeet") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="warmup broke the model"):
            client.infer_sample(np.zeros(3, np.float32))


# ---------------------------------------------------------------------- allow_http=False


def test_allow_http_false_serves_over_grpc() -> None:
    with Triton(
        config=loopback_config(allow_http=False),
        security_config=TritonSecurityConfig(restricted_endpoints=["model-repository"]),
    ) as triton:
        triton.bind("NoHttp", Recorder(), **IO)  # loaded over gRPC, with the token
        http_url, grpc_url = urls(triton)
        with ModelClient(grpc_url, "NoHttp") as client:
            y = client.infer_sample(np.zeros(3, np.float32))["y"]
        with pytest.raises(OSError):
            _status(http_url.removeprefix("http://"), "GET", "/v2/health/live", {})
        triton.unbind("NoHttp")
        with grpcclient.InferenceServerClient(grpc_url.removeprefix("grpc://")) as client:
            token = {GRPC_TOKEN_HEADER: triton.get_access_token() or ""}
            assert not client.is_model_ready("NoHttp", headers=token)
    np.testing.assert_array_equal(y, np.ones(3, np.float32))


# ---------------------------------------------------------------------- access tokens


def test_default_security_guards_the_control_endpoints(triton: Triton) -> None:
    triton.bind("Guarded", Recorder(), **IO)
    triton.run()
    token = triton.get_access_token()
    assert token  # PyTriton's default: a random token
    http_url, grpc_url = (u.split("://", 1)[1] for u in urls(triton))
    index = "/v2/repository/index"
    assert _status(http_url, "POST", index, {}) in (401, 403)
    assert _status(http_url, "POST", index, {TOKEN_HEADER: "wrong"}) in (401, 403)
    assert _status(http_url, "POST", index, {TOKEN_HEADER: token}) == 200
    with grpcclient.InferenceServerClient(grpc_url) as client:
        with pytest.raises(InferenceServerException):
            client.get_model_repository_index()
        assert client.get_model_repository_index(headers={GRPC_TOKEN_HEADER: token})
        # Inference and metadata stay open.
        assert client.is_model_ready("Guarded")
    with ModelClient(urls(triton)[0], "Guarded") as mc:
        mc.infer_sample(np.zeros(3, np.float32))
    triton.unbind("Guarded")  # the repository call carries the token


def test_explicit_token_and_endpoints() -> None:
    security = TritonSecurityConfig(access_token="s3cret", restricted_endpoints=["health"])
    with Triton(config=loopback_config(), security_config=security) as triton:
        assert triton.get_access_token() == "s3cret"
        http_url = urls(triton)[0].removeprefix("http://")
        # Readiness was asked with the token; without it the server refuses.
        assert _status(http_url, "GET", "/v2/health/ready", {}) in (401, 403)
        assert _status(http_url, "GET", "/v2/health/ready", {TOKEN_HEADER: "s3cret"}) == 200
        assert _status(http_url, "POST", "/v2/repository/index", {}) == 200


def test_no_restrictions(triton: Triton) -> None:
    t = Triton(
        config=loopback_config(), security_config=TritonSecurityConfig(restricted_endpoints=[])
    )
    try:
        assert t.get_access_token() is None
        t.run()
        assert (
            _status(urls(t)[0].removeprefix("http://"), "POST", "/v2/repository/index", {}) == 200
        )
    finally:
        t.stop()


def test_restrictions_of_the_triton_config_replace_the_default() -> None:
    own = loopback_config(http_restricted_api="model-repository:x-key=v")
    t = Triton(config=own)
    try:
        assert t.get_access_token() is None  # no default token on top of the user's own
    finally:
        t.stop()
    with pytest.raises(PyTritonValidationError, match="not both"):
        Triton(config=own, security_config=TritonSecurityConfig(access_token="t"))


def test_invalid_endpoint_names_are_refused() -> None:
    with pytest.raises(PyTritonValidationError, match="Invalid endpoint names: bogus"):
        TritonSecurityConfig(restricted_endpoints=["bogus"])


def test_remote_triton_with_access_token(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    restricted = "model-repository:triton-access-token=t0ken"
    args = [f"--http-restricted-api={restricted}", f"--grpc-restricted-protocol={restricted}"]
    with TritonServer(tmp_path / "repo", model_control_mode="explicit", extra_args=args) as server:
        with pytest.raises(PyTritonRuntimeError):
            with RemoteTriton(url=f"http://{server.http_url}") as remote:
                remote.bind("R", Recorder(), **IO)
        for url in (f"http://{server.http_url}", f"grpc://{server.grpc_url}"):
            with RemoteTriton(url=url, access_token="t0ken") as remote:
                remote.bind("R", Recorder(), **IO)
                with ModelClient(f"http://{server.http_url}", "R") as client:
                    y = client.infer_sample(np.zeros(3, np.float32))["y"]
                np.testing.assert_array_equal(y, np.ones(3, np.float32))


def test_warmup_config_as_triton_reads_it(tmp_path: Path) -> None:
    from pybackend.pytriton._config import config_pbtxt, model_config_dict, warmup

    np.save(tmp_path / "s.npy", np.array([b"ab", b"c"], dtype=np.bytes_))
    config = ModelConfig(
        model_warmup=[
            ModelWarmup(
                "mixed",
                4,
                {
                    "x": WarmupInput(np.float32, (3,), random_data=True),
                    "s": WarmupInput(bytes, (2,), input_data_file=str(tmp_path / "s.npy")),
                },
                1,
            )
        ]
    )
    inputs = [
        Tensor(name="x", dtype=np.float32, shape=(3,)),
        Tensor(name="s", dtype=bytes, shape=(2,)),
    ]
    text = config_pbtxt(model_config_dict("M", inputs, IO["outputs"], config, 1, "/tmp/s"))
    assert "model_warmup" in text and "random_data: true" in text
    assert 'input_data_file: "mixed_s"' in text and "batch_size: 4" in text
    # Triton's raw form of a string sample: each element's 4-byte length, then its bytes.
    assert warmup(config)[1] == {"warmup/mixed_s": b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"}


def test_warmup_input_without_data_is_refused(triton: Triton) -> None:
    config = ModelConfig(
        model_warmup=[ModelWarmup("w", 1, {"x": WarmupInput(np.float32, (3,))}, 1)]
    )
    with pytest.raises(PyTritonBadParameterError, match="zero_data"):
        triton.bind("NoData", Recorder(), **IO, config=config)
