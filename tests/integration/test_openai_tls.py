"""The OpenAI endpoint over HTTPS (``OpenAIServer(tls=)``, ``--openai-tls-cert`` /
``--openai-tls-key``): OpenAI's SDK trusting a certificate made for the test gets whole and
streamed answers; a plain-HTTP client and a client that never speaks are turned away
without holding up anyone; a client that leaves before its whole answer cancels the request
in tritonserver, as over HTTP; a certificate the endpoint cannot use is a one-line error
naming the file. Through a real tritonserver with our backend (TLS is the endpoint's; the
backend plays no part)."""

from __future__ import annotations

import argparse
import shutil
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

openai = pytest.importorskip("openai")

from integration_support.openai_cancel import (  # noqa: E402
    cancelled_after,
    leave_a_slow_whole_answer,
)
from pybackend.cli.openai_endpoint import EndpointOptions, add_endpoint_options  # noqa: E402
from pybackend.errors import PybackendError  # noqa: E402
from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.server import TritonServer  # noqa: E402

MODELS = Path(__file__).parent / "openai_models"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: ``cert`` and ``key`` apart,
    ``both`` in one file (made with the openssl command, which .ci/run installs)."""
    openssl = shutil.which("openssl")
    assert openssl, "these tests make their certificate with the openssl command: install it"
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        + ["-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2"]
        + ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    both = where / "both.pem"
    both.write_text(cert.read_text() + key.read_text())
    locked = where / "locked.pem"  # the key under a passphrase
    subprocess.run(
        [openssl, "pkey", "-in", str(key), "-out", str(locked), "-aes256"]
        + ["-passout", "pass:secret"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return {"cert": cert, "key": key, "both": both, "locked": locked}


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("tls-repo")
    shutil.copytree(MODELS / "echo_llm", repo / "echo_llm")
    return repo


@pytest.fixture(scope="module")
def triton(repository: Path) -> Iterator[TritonServer]:
    with TritonServer(repository) as server:
        yield server


def options(*given: str) -> EndpointOptions:
    parser = argparse.ArgumentParser()
    add_endpoint_options(parser)
    return EndpointOptions.of(parser.parse_args(list(given)))


@pytest.fixture(scope="module")
def endpoint(triton: TritonServer, certificate: Dict[str, Path]) -> Iterator[OpenAIServer]:
    server = options(
        "--openai-tls-cert", str(certificate["cert"]), "--openai-tls-key", str(certificate["key"])
    ).endpoint(triton.grpc_url, "127.0.0.1", 0)
    with server.start():
        yield server


def sdk(url: str, certificate: Dict[str, Path]) -> Any:
    trusting = openai.DefaultHttpxClient(
        verify=ssl.create_default_context(cafile=str(certificate["cert"]))
    )
    return openai.OpenAI(
        base_url=url, api_key="unused", max_retries=0, timeout=30, http_client=trusting
    )


def test_openai_s_sdk_gets_whole_and_streamed_answers_over_https(
    endpoint: OpenAIServer, certificate: Dict[str, Path]
) -> None:
    assert endpoint.url == f"https://127.0.0.1:{endpoint.port}/v1"
    with sdk(endpoint.url, certificate) as client:
        whole = client.completions.create(model="echo_llm", prompt="one two three")
        assert whole.choices[0].text == "three two one"
        pieces = client.completions.create(model="echo_llm", prompt="a b", stream=True)
        assert [c.choices[0].text for c in pieces] == ["b", " a", ""]
        assert [m.id for m in client.models.list()] == ["echo_llm"]


def test_a_certificate_and_key_in_one_file_serve_too(
    triton: TritonServer, certificate: Dict[str, Path]
) -> None:
    chosen = options("--openai-tls-cert", str(certificate["both"]))
    with chosen.endpoint(triton.grpc_url, "127.0.0.1", 0).start() as server:
        with sdk(server.url, certificate) as client:
            assert client.completions.create(model="echo_llm", prompt="x y").choices[0].text
    assert server.url.startswith("https://")


def test_plain_http_and_silent_clients_are_turned_away_and_hold_up_no_one(
    endpoint: OpenAIServer, certificate: Dict[str, Path]
) -> None:
    silent = socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)  # never speaks
    try:
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as plain:
            plain.sendall(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n")
            try:
                answered = plain.recv(4096)
            except ConnectionResetError:  # closed with the request's bytes unread
                answered = b""
        assert b"HTTP/1" not in answered  # the handshake failed: closed, nothing served
        # Meanwhile a client over TLS is served at once.
        with sdk(endpoint.url, certificate) as client:
            assert client.completions.create(model="echo_llm", prompt="c d").choices[0].text
    finally:
        silent.close()


def test_a_client_gone_before_its_whole_answer_cancels_the_request_over_tls(
    endpoint: OpenAIServer, repository: Path, certificate: Dict[str, Path]
) -> None:
    # As tests/integration/test_openai_endpoint.py's HTTP case: the model's only response
    # would come after 200 x 50 ms; the client leaves after 0.5 s (its FIN, no close_notify:
    # Python's close does not send one) and the endpoint, watching the connection, cancels
    # the request.
    marker = repository / "echo_llm" / "cancelled"
    marker.unlink(missing_ok=True)
    trusting = ssl.create_default_context(cafile=str(certificate["cert"]))
    leave_a_slow_whole_answer(
        lambda: trusting.wrap_socket(
            socket.create_connection(("127.0.0.1", endpoint.port), timeout=10),
            server_hostname="127.0.0.1",
        )
    )
    assert cancelled_after(marker) < 100


@pytest.mark.parametrize(
    ("given", "words"),
    [
        (["--openai-tls-cert", "/nonexistent/cert.pem"], "No such file or directory"),
        (["--openai-tls-key", "key.pem"], "give --openai-tls-cert FILE with it"),
        (["--openai-tls-cert", "{cert}"], "not a PEM certificate with its private key"),
        (["--openai-tls-cert", "{key}"], "not a PEM certificate with its private key"),
        (
            ["--openai-tls-cert", "{cert}", "--openai-tls-key", "{locked}"],
            "the private key is encrypted",
        ),
    ],
    ids=[
        "no-such-file",
        "a-key-alone",
        "a-certificate-without-its-key",
        "a-key-as-certificate",
        "an-encrypted-key",  # refused, never a passphrase prompt on the terminal
    ],
)
def test_a_certificate_the_endpoint_cannot_use_is_a_one_line_error(
    certificate: Dict[str, Path], given: List[str], words: str
) -> None:
    args = [a.format(**{k: str(v) for k, v in certificate.items()}) for a in given]
    with pytest.raises(PybackendError) as caught:
        options(*args)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert args[1] in str(caught.value)  # the file named
