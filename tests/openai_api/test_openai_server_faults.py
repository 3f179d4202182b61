"""The endpoint's own faults, without a tritonserver: an unexpected exception while serving
a request is an answer (500, OpenAI's error body, the exception named), never a dropped
connection, and the endpoint serves on."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Dict, Tuple

import pytest

pytest.importorskip("tritonclient.grpc")

from pybackend.openai_api import OpenAIServer  # noqa: E402
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

        monkeypatch.setattr(server, "text_model", broken)
        status, body = post(f"{server.url}/completions", {"model": "m", "prompt": "hi"})
        assert status == 500
        assert body["error"]["message"] == "the endpoint failed: RuntimeError: no config for m"
        assert body["error"]["type"] == "server_error"
        assert "RuntimeError: no config for m" in capsys.readouterr().err  # the traceback

        monkeypatch.undo()
        status, body = post(f"{server.url}/completions", {"model": "m", "prompt": "hi"})
        assert status == 503  # the real path again: Triton is not there
        assert body["error"]["message"].startswith("Triton is not reachable: ")
