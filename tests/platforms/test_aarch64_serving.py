"""pybackend on aarch64, end to end: tritonserver 2.51 for aarch64 (NVIDIA's aarch64 wheel)
loads libtriton_python.so from our aarch64 wheel, whose stubs run Debian's aarch64 CPython
3.11 with numpy's aarch64 wheel and the wheel's aarch64 native helper, all under qemu-user;
the clients are this machine's, over HTTP and gRPC. The example models answer as they do on
x86-64: plain tensors, strings, decoupled streaming, BLS, a model's error, and a killed
stub's restart."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from aarch64_support import BACKENDS, TRITONSERVER, EmulatedTritonServer, kit
from tritonclient.utils import InferenceServerException

from integration_support import EXAMPLES_REPOSITORY, example_client
from integration_support.clients import InferClient

#: The server's start under emulation (the module's first test sets it up) may take minutes
#: on a loaded 2-core machine: more than the suite's 300 s per test.
pytestmark = pytest.mark.timeout(900)

MODELS_DIR = Path(__file__).resolve().parent / "models"
EXAMPLES = (
    "add_sub",
    "string_echo",
    "token_stream",
    "bls_preprocess",
    "bls_postprocess",
    "bls_pipeline",
    "error_model",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedTritonServer]:
    kit()
    repo = tmp_path_factory.mktemp("aarch64_repo")
    for name in EXAMPLES:
        shutil.copytree(EXAMPLES_REPOSITORY / name, repo / name)
    shutil.copytree(MODELS_DIR / "platform_probe", repo / "platform_probe")
    with EmulatedTritonServer(repo) as s:
        yield s
    assert not s.killed_stragglers, s.killed_stragglers


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: EmulatedTritonServer) -> Iterator[InferClient]:
    if request.param == "http":
        c = InferClient("http", httpclient, httpclient.InferenceServerClient(server.http_url))
    else:
        c = InferClient("grpc", grpcclient, grpcclient.InferenceServerClient(server.grpc_url))
    yield c
    c.client.close()


def probe(client: InferClient, texts: list[str]) -> tuple[dict[str, Any], list[int]]:
    array = np.array([t.encode() for t in texts], dtype=np.object_)
    out = client.infer("platform_probe", {"TEXTS": array}, ["REPORT", "LENGTHS"])
    return json.loads(out["REPORT"][0]), out["LENGTHS"].tolist()


def test_the_server_is_the_aarch64_build_with_our_backend(server: EmulatedTritonServer) -> None:
    library = BACKENDS / "python" / "libtriton_python.so"
    log = server.log_text()
    assert f"pybackend: Python backend 'python' loaded from {library}" in log
    assert f"(stub interpreter: {kit() / 'python3'})" in log
    assert str(TRITONSERVER) in server.command
    assert int.from_bytes(TRITONSERVER.read_bytes()[18:20], "little") == 183  # EM_AARCH64


def test_the_stub_runs_aarch64_python_with_the_native_helper(client: InferClient) -> None:
    report, lengths = probe(client, ["", "a", "héllo", "x" * 1000])
    assert report["machine"] == "aarch64"
    assert report["python"].startswith("3.11.")
    assert report["byteorder"] == "little"
    assert report["native_helper"] is True  # the kit's aarch64 libpybackend_native.so loaded
    assert lengths == [0, 1, 5, 1000]


def test_add_sub(client: InferClient) -> None:
    in0 = np.array([1.5, 2, 3, 4], dtype=np.float32)
    in1 = np.array([10, 20, 30, 40], dtype=np.float32)
    out = client.infer("add_sub", {"INPUT0": in0, "INPUT1": in1}, ["OUTPUT0", "OUTPUT1"])
    np.testing.assert_array_equal(out["OUTPUT0"], in0 + in1)
    np.testing.assert_array_equal(out["OUTPUT1"], in0 - in1)


def test_strings_round_trip(client: InferClient) -> None:
    texts = [b"", b"plain", "ünïcödé".encode(), b"\x00\xff binary", b"y" * 70000]
    array = np.array([texts], dtype=np.object_)
    out = client.infer("string_echo", {"INPUT0": array}, ["OUTPUT0", "OUTPUT1"])
    assert out["OUTPUT0"].tolist() == [texts]


def test_bls_pipeline(client: InferClient) -> None:
    out = client.infer(
        "bls_pipeline",
        {"TEXT": np.array([b"hello world"], np.object_), "WEIGHTS": np.zeros(4, np.float32)},
        ["LABEL", "SCORES"],
    )
    assert out["LABEL"].tolist() == [b"letters"]
    np.testing.assert_array_equal(out["SCORES"], np.array([10, 0, 1, 0], np.float32))


def test_a_models_error_reaches_the_client(client: InferClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("error_model", {"INPUT0": np.zeros(3, dtype=np.float32)}, ["OUTPUT0"])
    message = caught.value.message()
    assert "error_model refuses every request (first one had 3 values)" in message
    assert "ValueError" in message


def test_decoupled_streaming(server: EmulatedTritonServer) -> None:
    stream_tokens = example_client("stream_tokens").stream_tokens
    tokens = list(stream_tokens(server.grpc_url, "the quick brown fox", timeout=120.0))
    assert tokens == ["Fox", "Brown", "Quick", "The"]


def test_a_killed_stub_is_noticed_and_replaced(server: EmulatedTritonServer) -> None:
    """The stub's death is seen (pidfd under emulation), the next request after the report
    is served by a new stub."""
    c = InferClient("http", httpclient, httpclient.InferenceServerClient(server.http_url))
    (report, _) = probe(c, ["a"])
    os.kill(report["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while "was killed by signal 9" not in server.log_text():
        assert time.monotonic() < deadline, "the stub's death was not noticed"
        time.sleep(0.2)
    with pytest.raises(InferenceServerException) as caught:
        probe(c, ["a"])
    assert "Stub process 'platform_probe_0_0' is not healthy" in str(caught.value)
    (again, lengths) = probe(c, ["abc"])
    assert again["pid"] != report["pid"] and lengths == [3]
    c.client.close()
