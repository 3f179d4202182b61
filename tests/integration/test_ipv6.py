"""IPv6 listening addresses (pybackend/server/addresses.py): the launcher (used by `pybackend
serve`, ServerModel, the tests) starts tritonserver on ``::1`` (its flags want three
spellings: ``ipv6:ADDR`` for HTTP and metrics, ``[ADDR]`` for gRPC) and gives clients URLs
with the address in brackets; the OpenAI endpoint listens on IPv6 too, ``::`` taking IPv4
clients as well. Through a real tritonserver with our backend (the addresses are the
launcher's and the endpoint's; no backend code is involved)."""

from __future__ import annotations

import shutil
import socket
import urllib.request
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

openai = pytest.importorskip("openai")
grpcclient = pytest.importorskip("tritonclient.grpc")
httpclient = pytest.importorskip("tritonclient.http")

from integration_support import EXAMPLES_REPOSITORY  # noqa: E402
from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.server import TritonServer  # noqa: E402


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


# A container started with IPv6 switched off has no ::1; nothing here can run there.
pytestmark = pytest.mark.skipif(
    not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback address (::1)"
)


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repository = tmp_path_factory.mktemp("ipv6")
    for name in ("add_sub", "text_generation"):
        shutil.copytree(EXAMPLES_REPOSITORY / name, repository / name)
    with TritonServer(repository, host="[::1]") as server:  # as a URL writes it
        assert server.host == "::1"
        yield server


def test_tritonserver_serves_http_grpc_and_metrics_on_ipv6(triton: TritonServer) -> None:
    assert triton.http_url == f"[::1]:{triton.http_port}"
    assert triton.grpc_url == f"[::1]:{triton.grpc_port}"
    a = np.arange(4, dtype=np.float32)
    for module in (httpclient, grpcclient):
        client = module.InferenceServerClient(
            triton.http_url if module is httpclient else triton.grpc_url
        )
        inputs = [module.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(a * 10)
        result = client.infer("add_sub", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 11)
        client.close()
    with urllib.request.urlopen(triton.metrics_url, timeout=30) as answer:
        assert b"nv_inference_request_success" in answer.read()


def test_explicit_mode_models_are_unloaded_before_the_stop_on_ipv6(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES_REPOSITORY / "add_sub", tmp_path / "add_sub")
    server = TritonServer(
        tmp_path, host="::1", model_control_mode="explicit", load_models=["add_sub"]
    )
    with server:
        assert server.is_ready()
    # The launcher's unload went to the server's HTTP port on ::1 before its SIGTERM.
    log = server.log_text()
    assert log.index("successfully unloaded 'add_sub'") < log.index("Waiting for in-flight")


@pytest.mark.parametrize("host", ["::1", "::", "[::1]"])
def test_the_openai_endpoint_listens_on_ipv6(triton: TritonServer, host: str) -> None:
    with OpenAIServer(triton.grpc_url, host=host, timeout=30) as endpoint:
        assert endpoint.url == f"http://[{host.strip('[]')}]:{endpoint.port}/v1"
        # "::" also takes IPv4 clients (the endpoint clears IPV6_V6ONLY).
        bases = [f"http://[::1]:{endpoint.port}/v1"]
        if host == "::":
            bases.append(f"http://127.0.0.1:{endpoint.port}/v1")
        for base in bases:
            with openai.OpenAI(base_url=base, api_key="unused", max_retries=0) as client:
                answer = client.chat.completions.create(
                    model="text_generation", messages=[{"role": "user", "content": "hello world"}]
                )
            assert answer.choices[0].message.content == "World Hello"
