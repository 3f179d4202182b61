"""The text_generation and text_embedding example models and examples/clients/openai_chat.py
and openai_embeddings.py through the OpenAI-compatible endpoint in front of a real
tritonserver (the session's examples server): a prompt, a conversation, streamed and whole,
cut by max_tokens and stop; texts embedded, ranked, shortened; and a developer's
test of the model through OpenAI's SDK, with ServerModel (docs/openai.md, "Testing").

Runs against the original too (PYBACKEND_TEST_BACKEND=original): the endpoint is a client of
tritonserver, whatever backend serves the model.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

openai = pytest.importorskip("openai")

from integration_support import EXAMPLE_CLIENTS, EXAMPLES_REPOSITORY  # noqa: E402
from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.testing import ServerModel  # noqa: E402


@pytest.fixture(scope="module")
def endpoint(examples_server) -> Iterator[OpenAIServer]:
    with OpenAIServer(examples_server.grpc_url, timeout=60) as server:
        yield server


def run_client(script: str, endpoint: OpenAIServer, *args: str) -> str:
    """What an example client printed, run as a user runs it."""
    command = [sys.executable, str(EXAMPLE_CLIENTS / script), "--url", endpoint.url, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def test_the_client_streams_the_reply(endpoint: OpenAIServer) -> None:
    stdout = run_client("openai_chat.py", endpoint, "the quick fox")
    assert stdout == "Fox Quick The\n"


def test_completion_and_chat_answer_alike(endpoint: OpenAIServer) -> None:
    with openai.OpenAI(
        base_url=endpoint.url, api_key="unused", max_retries=0, timeout=60
    ) as client:
        assert "text_generation" in [m.id for m in client.models.list()]
        completion = client.completions.create(
            model="text_generation", prompt="a b c", max_tokens=2
        )
        assert (completion.choices[0].text, completion.choices[0].finish_reason) == (
            "C B",
            "length",
        )
        chat = client.chat.completions.create(
            model="text_generation",
            messages=[
                {"role": "user", "content": "not this one"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "one two three"},
            ],
            stop=["One"],
        )
        assert (chat.choices[0].message.content, chat.choices[0].finish_reason) == (
            "Three Two",
            "stop",
        )
        pieces = [
            c.choices[0].delta.content
            for c in client.chat.completions.create(
                model="text_generation", messages=[{"role": "user", "content": "x y"}], stream=True
            )
            if c.choices and c.choices[0].delta.content
        ]
    assert pieces == ["Y", " X"]


def test_the_embeddings_client_ranks_texts_by_similarity(endpoint: OpenAIServer) -> None:
    texts = ["the cat sat", "stock prices fell", "a cat sat down", "the dog ran"]
    stdout = run_client("openai_embeddings.py", endpoint, *texts)
    # Words hashed into 64 dimensions: 2 of 3 words shared, 1 of 3, none.
    assert stdout.splitlines() == [
        "0.577  a cat sat down",
        "0.333  the dog ran",
        "0.000  stock prices fell",
    ]


def test_the_embedding_model_through_openai_s_sdk(endpoint: OpenAIServer) -> None:
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
    words += "mike november oscar papa quebec romeo sierra tango".split()
    texts = [" ".join(words[: i + 1]) for i in range(20)]  # 20 different vectors
    with openai.OpenAI(
        base_url=endpoint.url, api_key="unused", max_retries=0, timeout=60
    ) as client:
        assert "text_embedding" in [m.id for m in client.models.list()]
        many = client.embeddings.create(model="text_embedding", input=texts)
        one = client.embeddings.create(model="text_embedding", input=texts[7])
        short = client.embeddings.create(model="text_embedding", input="a b c", dimensions=8)
        with pytest.raises(openai.BadRequestError) as refused:
            client.embeddings.create(model="text_embedding", input="a", dimensions=100)
    vectors = np.array([item.embedding for item in many.data], np.float32)
    assert vectors.shape == (20, 64) and [item.index for item in many.data] == list(range(20))
    assert len({row.tobytes() for row in vectors}) == 20
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.array_equal(vectors[7], np.array(one.data[0].embedding, np.float32))  # in order
    assert len(short.data[0].embedding) == 8
    assert np.isclose(np.linalg.norm(short.data[0].embedding), 1, atol=1e-5)
    assert "dimensions must be 1 to 64, got 100" in str(refused.value)


def test_the_embedding_model_answers_every_row_of_a_request(http_client) -> None:
    # Straight to tritonserver: a request of two texts (rows) gets two vectors.
    import tritonclient.http as httpclient

    given = httpclient.InferInput("text_input", [2, 1], "BYTES")
    given.set_data_from_numpy(np.array([[b"the cat sat"], [b"a cat sat down"]], np.object_))
    rows = http_client.infer("text_embedding", [given]).as_numpy("embedding")
    assert rows.shape == (2, 64)
    assert np.isclose(float(rows[0] @ rows[1]), 0.577, atol=1e-3)


def test_a_developer_tests_the_model_through_openai_s_sdk(backend_kind: str) -> None:
    # docs/openai.md's "Testing" snippet, as a developer's test runs it.
    model_dir = EXAMPLES_REPOSITORY / "text_generation"
    with (
        ServerModel(model_dir, backend=backend_kind) as served,
        OpenAIServer(served.server.grpc_url) as api,
        openai.OpenAI(base_url=api.url, api_key="unused") as client,
    ):
        answer = client.chat.completions.create(
            model="text_generation", messages=[{"role": "user", "content": "hello world"}]
        )
    assert answer.choices[0].message.content == "World Hello"
