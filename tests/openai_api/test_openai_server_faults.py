"""The endpoint's own faults and malformed requests, without a tritonserver: an unexpected
exception while serving a request is an answer (500, OpenAI's error body, the exception
named; mid-stream an error event, then the end), never a dropped connection or a stream cut
short as if complete; bodies it cannot read are refused; the endpoint serves on."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, Tuple

import numpy as np
import pytest

pytest.importorskip("tritonclient.grpc")

from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.openai_api.config_cache import Read  # noqa: E402
from pybackend.server.processes import free_ports  # noqa: E402


def post(url: str, body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_unexpected_fault_is_a_500_answer_and_the_endpoint_serves_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens on the Triton port: only the patched step and the unreachable check run.
    with OpenAIServer(f"127.0.0.1:{free_ports(1)[0]}", timeout=5) as server:

        def broken(client: Any, name: str) -> Any:
            raise RuntimeError(f"no config for {name}")

        monkeypatch.setattr(server.upstream, "config", broken)
        status, body = post(f"{server.url}/completions", {"model": "m", "prompt": "hi"})
        assert status == 500
        assert body["error"]["message"] == "the endpoint failed: RuntimeError: no config for m"
        assert body["error"]["type"] == "server_error"
        assert "RuntimeError: no config for m" in capsys.readouterr().err  # the traceback

        monkeypatch.undo()
        status, body = post(f"{server.url}/completions", {"model": "m", "prompt": "hi"})
        assert status == 503  # the real path again: Triton is not there
        assert body["error"]["message"].startswith("Triton is not reachable: ")


def test_a_fault_mid_stream_is_an_error_event_then_the_end(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "name": "m",
        "model_transaction_policy": {"decoupled": True},
        "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]}],
        "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]}],
    }

    def generate(client: Any, model: Any, tensors: Any, watch: Any) -> Iterator[Dict[str, Any]]:
        yield {"text_output": np.array([b"first"], np.object_)}
        raise RuntimeError("lost the model")

    with OpenAIServer(f"127.0.0.1:{free_ports(1)[0]}", timeout=5) as server:
        monkeypatch.setattr(server.upstream, "config", lambda client, name: Read(config, False))
        monkeypatch.setattr(server.upstream, "generate", generate)
        request = urllib.request.Request(
            f"{server.url}/completions",
            json.dumps({"model": "m", "prompt": "hi", "stream": True}).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            events = [line for line in answer.read().decode().split("\n\n") if line]
    assert json.loads(events[0][len("data: ") :])["choices"][0]["text"] == "first"
    assert json.loads(events[1][len("data: ") :]) == {
        "error": {
            "message": "the endpoint failed: RuntimeError: lost the model",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    assert events[2:] == ["data: [DONE]"]
    assert "RuntimeError: lost the model" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("headers", "status", "words"),
    [
        ({"Transfer-Encoding": "chunked"}, 411, "with a Content-Length (not chunked)"),
        ({"Content-Length": "-5"}, 400, "Content-Length is negative"),
        ({"Content-Length": "ten"}, 400, "Content-Length is not a number"),
        ({"Content-Length": str(64 * 1024 * 1024)}, 413, "larger than 16777216 bytes"),
    ],
)
def test_bodies_it_cannot_read_are_refused_and_the_connection_closed(
    headers: Dict[str, str], status: int, words: str
) -> None:
    with OpenAIServer(f"127.0.0.1:{free_ports(1)[0]}", timeout=5) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.putrequest("POST", "/v1/completions", skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        assert answer.status == status and words in json.load(answer)["error"]["message"]
        assert answer.getheader("Connection") == "close"
        connection.close()
