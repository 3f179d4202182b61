"""The token-streaming example (examples/model_repository/token_stream and
examples/clients/stream_tokens.py) through a real tritonserver over gRPC streaming.

Runs against the original too (PYBACKEND_TEST_BACKEND=original): same tokens.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from integration_support import EXAMPLE_CLIENTS, example_client

CLIENT_SCRIPT = EXAMPLE_CLIENTS / "stream_tokens.py"


@pytest.fixture(scope="module")
def stream_client() -> ModuleType:
    return example_client("stream_tokens")


def test_tokens_arrive_in_order(examples_server, stream_client) -> None:
    tokens = list(stream_client.stream_tokens(examples_server.grpc_url, "the quick brown fox"))
    assert tokens == ["Fox", "Brown", "Quick", "The"]


def test_max_tokens(examples_server, stream_client) -> None:
    tokens = list(stream_client.stream_tokens(examples_server.grpc_url, "a b c d e", 2))
    assert tokens == ["E", "D"]


def test_zero_tokens_is_just_the_final_response(examples_server, stream_client) -> None:
    assert list(stream_client.stream_tokens(examples_server.grpc_url, "a b", 0)) == []


def test_many_streams_at_once(examples_server, stream_client) -> None:
    prompts = [" ".join(f"w{i}x{j}" for j in range(6)) for i in range(6)]

    def run(prompt: str) -> list[str]:
        return list(stream_client.stream_tokens(examples_server.grpc_url, prompt))

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(run, prompts))
    for prompt, tokens in zip(prompts, results):
        assert tokens == [w.capitalize() for w in reversed(prompt.split())]


def test_a_cancelled_stream_leaves_the_model_serving(examples_server, stream_client) -> None:
    stream = stream_client.stream_tokens(examples_server.grpc_url, " ".join(["w"] * 200))
    assert next(stream) == "W"
    stream.close()  # stops (and cancels) the stream in the generator's finally
    assert list(stream_client.stream_tokens(examples_server.grpc_url, "still here")) == [
        "Here",
        "Still",
    ]


def test_client_script(examples_server) -> None:
    done = subprocess.run(
        [sys.executable, str(CLIENT_SCRIPT), "--url", examples_server.grpc_url, "hello streaming"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Streaming", "Hello"]
