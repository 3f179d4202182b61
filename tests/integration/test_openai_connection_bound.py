"""The OpenAI endpoint serves at most ``max_connections`` connections at once
(``--openai-max-connections``, pybackend/openai_api/listener.py): a connection past them is
answered 503 with ``Retry-After: 1`` and OpenAI's error body (its request read first, a body
too), a freed place serves the next client, OpenAI's SDK gets through by its own retries once
a place frees, and past the answers given at once a connection is closed unanswered.
Through a real tritonserver with our backend (the bound is the endpoint's)."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List

import pytest

openai = pytest.importorskip("openai")

from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.server import TritonServer  # noqa: E402

MODELS = Path(__file__).parent / "openai_models"
WAIT_S = 10.0


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("bound-repo")
    shutil.copytree(MODELS / "echo_llm", repo / "echo_llm")
    with TritonServer(repo) as server:
        yield server


@pytest.fixture
def endpoint(triton: TritonServer) -> Iterator[OpenAIServer]:
    with OpenAIServer(triton.grpc_url, timeout=30, max_connections=2) as server:
        yield server


@pytest.fixture
def silent() -> Iterator[List[socket.socket]]:
    """Connections a test opens and never speaks on (each holds a place)."""
    opened: List[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def hold(endpoint: OpenAIServer, opened: List[socket.socket], count: int) -> None:
    for _ in range(count):
        opened.append(socket.create_connection(("127.0.0.1", endpoint.port), timeout=WAIT_S))


def until(what: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not what():
        assert time.monotonic() < deadline, "the endpoint's count did not change in time"
        time.sleep(0.01)


def ask(endpoint: OpenAIServer, method: str, path: str, body: Any = None) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=WAIT_S)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), json.loads(answer.read())
    finally:
        conn.close()


def test_a_connection_past_the_bound_is_answered_503_with_retry_after(
    endpoint: OpenAIServer, silent: List[socket.socket]
) -> None:
    hold(endpoint, silent, 2)
    until(lambda: endpoint._http.serving == 2)
    completion = {"model": "echo_llm", "prompt": "x" * 100_000, "max_tokens": 4}
    for method, path, body in (
        ("GET", "/v1/models", None),
        ("POST", "/v1/completions", completion),
    ):
        status, headers, answer = ask(endpoint, method, path, body)
        assert status == 503 and headers["Retry-After"] == "1", (method, answer)
        assert headers["Connection"] == "close"
        assert answer["error"]["code"] == "too_many_connections"
        assert answer["error"]["message"] == (
            "the endpoint serves at most 2 connections at once and all are taken: retry "
            "shortly (its operator sets the bound with --openai-max-connections)"
        )
    until(lambda: endpoint._http.refusing == 0)
    assert endpoint._http.serving == 2


def test_a_freed_place_serves_the_next_client(
    endpoint: OpenAIServer, silent: List[socket.socket]
) -> None:
    hold(endpoint, silent, 2)
    until(lambda: endpoint._http.serving == 2)
    assert ask(endpoint, "GET", "/v1/models")[0] == 503
    silent.pop().close()
    until(lambda: endpoint._http.serving == 1)
    status, _, answer = ask(endpoint, "GET", "/v1/models")
    assert status == 200 and [m["id"] for m in answer["data"]] == ["echo_llm"]


def test_the_sdk_gets_through_by_its_own_retries(
    endpoint: OpenAIServer, silent: List[socket.socket]
) -> None:
    """The place frees once the SDK's first try was refused, while it waits its Retry-After
    second: its retry is served."""
    hold(endpoint, silent, 2)
    until(lambda: endpoint._http.serving == 2)
    client = openai.OpenAI(base_url=endpoint.url, api_key="unused", max_retries=2, timeout=30)
    answers: List[Any] = []
    asking = threading.Thread(
        target=lambda: answers.append(
            client.completions.create(model="echo_llm", prompt="hello there", max_tokens=2)
        )
    )
    try:
        asking.start()
        until(lambda: endpoint._http.refused >= 1)
        silent.pop().close()
        asking.join(WAIT_S)
    finally:
        client.close()
    assert endpoint._http.refused == 1
    assert answers and answers[0].choices[0].text  # served: the echo model's words


def test_past_the_answers_given_at_once_a_connection_is_closed(
    endpoint: OpenAIServer, silent: List[socket.socket]
) -> None:
    endpoint._http.refusals_at_once = 1
    hold(endpoint, silent, 3)  # two served, the third waits for its request to be answered
    until(lambda: endpoint._http.serving == 2 and endpoint._http.refusing == 1)
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=WAIT_S) as late:
        late.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            assert late.recv(1024) == b""  # closed unanswered
        except ConnectionResetError:
            pass  # the same, as some kernels report it
    assert endpoint._http.serving == 2 and endpoint._http.refusing == 1
    silent[2].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert silent[2].recv(1024).startswith(b"HTTP/1.1 503 ")  # the waiting one is answered
    until(lambda: endpoint._http.refusing == 0)


def test_a_slow_body_past_the_bound_is_closed_within_the_refusal_time(
    endpoint: OpenAIServer, silent: List[socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused client that never sends the body it announced holds its refusal for
    REFUSAL_SECONDS in all, then is closed unanswered."""
    monkeypatch.setattr("pybackend.openai_api.listener.REFUSAL_SECONDS", 0.5)
    hold(endpoint, silent, 2)
    until(lambda: endpoint._http.serving == 2)
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=WAIT_S) as slow:
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        slow.sendall(b"{")
        # Within half the refusal's per-read timeout (10 s): the 0.5 s for the whole body
        # closed it, not a read that timed out.
        slow.settimeout(5)
        assert slow.recv(1024) == b""  # closed, nothing answered
    until(lambda: endpoint._http.refusing == 0)


def test_a_negative_bound_is_refused(triton: TritonServer) -> None:
    with pytest.raises(ValueError, match="max_connections must be 0"):
        OpenAIServer(triton.grpc_url, max_connections=-1)


def test_no_bound_with_zero(triton: TritonServer, silent: List[socket.socket]) -> None:
    with OpenAIServer(triton.grpc_url, timeout=30, max_connections=0) as endpoint:
        hold(endpoint, silent, 8)
        until(lambda: endpoint._http.serving == 8)
        assert ask(endpoint, "GET", "/v1/models")[0] == 200
