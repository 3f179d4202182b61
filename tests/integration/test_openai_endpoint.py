"""The OpenAI-compatible endpoint in front of a real tritonserver, spoken to with OpenAI's
own Python SDK: completions and chat, whole and streamed, what reaches the model, the
refusals, a model's failure mid-stream, a client that goes away (streaming or waiting for a
whole answer), the API key."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

from integration_support.openai_cancel import (  # noqa: E402
    cancelled_after,
    leave_a_slow_whole_answer,
)
from pybackend.openai_api import ChatTemplate, OpenAIServer  # noqa: E402
from pybackend.server import TritonServer  # noqa: E402

MODELS = Path(__file__).parent / "openai_models"
#: A chat template in the style of Hugging Face's (role headers, then the assistant's turn).
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("openai-repo")
    for model in MODELS.iterdir():
        shutil.copytree(model, repo / model.name)
    return repo


@pytest.fixture(scope="module")
def triton(repository: Path, backend_kind: str) -> Iterator[TritonServer]:
    with TritonServer(repository, backend=backend_kind) as server:
        yield server


@pytest.fixture(scope="module")
def endpoint(triton: TritonServer) -> Iterator[OpenAIServer]:
    template = ChatTemplate(TEMPLATE, "test template")
    with OpenAIServer(triton.grpc_url, chat_template=template, timeout=30) as server:
        yield server


#: The SDK clients a test made: each keeps its connections open until it is closed.
_CLIENTS: list = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def sdk(server: OpenAIServer, key: str = "unused") -> Any:
    client = openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=30)
    _CLIENTS.append(client)
    return client


def test_models_lists_the_text_and_embedding_models(endpoint: OpenAIServer) -> None:
    client = sdk(endpoint)
    assert sorted(m.id for m in client.models.list()) == [
        "chat_llm",
        "echo_llm",
        "embed_plain",
        "embed_vllm",
    ]
    assert client.models.retrieve("echo_llm").owned_by == "pybackend"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("not_text")


def test_completion_whole(endpoint: OpenAIServer) -> None:
    answer = sdk(endpoint).completions.create(model="echo_llm", prompt="one two three")
    assert answer.object == "text_completion"
    assert answer.choices[0].text == "three two one"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (3, 3)


def test_completion_max_tokens_and_stop(endpoint: OpenAIServer) -> None:
    client = sdk(endpoint)
    cut = client.completions.create(model="echo_llm", prompt="a b c d", max_tokens=2)
    assert (cut.choices[0].text, cut.choices[0].finish_reason) == ("d c", "length")
    stopped = client.completions.create(model="echo_llm", prompt="a b c d", stop="b")
    assert (stopped.choices[0].text, stopped.choices[0].finish_reason) == ("d c", "stop")


def test_completion_streamed_piece_by_piece(endpoint: OpenAIServer) -> None:
    chunks = list(
        sdk(endpoint).completions.create(
            model="echo_llm",
            prompt="one two three",
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert texts == ["three", " two", " one", ""]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    assert chunks[-1].usage.prompt_tokens == 3  # given by the first response only
    assert len({c.id for c in chunks}) == 1


def test_what_reaches_the_model(endpoint: OpenAIServer) -> None:
    answer = sdk(endpoint).completions.create(
        model="echo_llm", prompt="!params", max_tokens=5, temperature=0.5, top_p=0.9, seed=7
    )
    got = json.loads(answer.choices[0].text)
    assert got["sampling"] == {"max_tokens": 5, "temperature": 0.5, "top_p": 0.9, "seed": 7}
    assert got["flags"] == {
        "stream": False,
        "exclude_input_in_output": True,
        "return_finish_reason": True,
        "return_num_input_tokens": True,
        "return_num_output_tokens": True,
    }
    # One element of the declared type each (the model does not batch: no batch dimension).
    assert got["tensors"] == {
        "text_input": ["object", [1]],
        "sampling_parameters": ["object", [1]],
        "stream": ["bool", [1]],
        "exclude_input_in_output": ["bool", [1]],
        "return_finish_reason": ["bool", [1]],
        "return_num_input_tokens": ["bool", [1]],
        "return_num_output_tokens": ["bool", [1]],
    }


def test_chat_through_the_template(endpoint: OpenAIServer) -> None:
    client = sdk(endpoint)
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there"},
    ]
    answer = client.chat.completions.create(model="echo_llm", messages=messages)
    assert answer.object == "chat.completion"
    # The rendered prompt ("<|system|>be brief\n<|user|>hello there\n<|assistant|>"): its
    # words reversed by the model.
    reply = "<|assistant|> there <|user|>hello brief <|system|>be"
    assert answer.choices[0].message.content == reply
    assert answer.choices[0].message.role == "assistant"
    streamed = list(
        client.chat.completions.create(model="echo_llm", messages=messages, stream=True)
    )
    assert streamed[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in streamed)
    assert text == answer.choices[0].message.content
    assert streamed[-1].choices[0].finish_reason == "stop"
    assert {c.object for c in streamed} == {"chat.completion.chunk"}


def test_chat_model_gets_the_conversation_as_json(endpoint: OpenAIServer) -> None:
    answer = sdk(endpoint).chat.completions.create(
        model="chat_llm",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "bye"},
        ],
        max_completion_tokens=9,
        temperature=0.25,
    )
    assert (
        answer.choices[0].message.content
        == "roles=user,assistant,user last=bye max_tokens=9 temperature=0.25"
    )
    assert answer.usage is None  # the model reports no token counts


def test_a_model_that_is_not_decoupled_streams_as_one_chunk(endpoint: OpenAIServer) -> None:
    chunks = list(
        sdk(endpoint).chat.completions.create(
            model="chat_llm",
            messages=[{"role": "user", "content": "bye"}],
            stream=True,
            stream_options={"include_usage": True},  # the model counts nothing: no usage chunk
        )
    )
    assert [c.choices[0].delta.role for c in chunks] == ["assistant", None, None]
    assert chunks[1].choices[0].delta.content.startswith("roles=user last=bye")
    assert chunks[2].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)


def test_chat_without_a_template_says_how_to_give_one(triton: TritonServer) -> None:
    with OpenAIServer(triton.grpc_url, timeout=30) as bare:
        with pytest.raises(openai.BadRequestError) as caught:
            sdk(bare).chat.completions.create(
                model="echo_llm", messages=[{"role": "user", "content": "x"}]
            )
    assert "--chat-template" in str(caught.value) and "'messages'" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"model": "nope", "prompt": "x"}, "NotFoundError", "`nope` does not exist"),
        ({"model": "not_text", "prompt": "x"}, "BadRequestError", "has no input 'text_input'"),
        ({"model": "echo_llm", "prompt": "x", "n": 2}, "BadRequestError", "only n=1"),
        ({"model": "echo_llm", "prompt": ["a", "b"]}, "BadRequestError", "one request per prompt"),
        ({"model": "chat_llm", "prompt": "x"}, "BadRequestError", "/v1/chat/completions"),
        ({"model": "echo_llm", "prompt": "x", "max_tokens": 0}, "BadRequestError", "at least 1"),
    ],
)
def test_refusals(endpoint: OpenAIServer, kwargs: dict, error: str, words: str) -> None:
    with pytest.raises(getattr(openai, error)) as caught:
        sdk(endpoint).completions.create(**kwargs)
    assert words in str(caught.value)


def test_model_failure_whole_and_mid_stream(endpoint: OpenAIServer) -> None:
    client = sdk(endpoint)
    with pytest.raises(openai.InternalServerError) as whole:
        client.completions.create(model="echo_llm", prompt="!fail a b c")
    assert "the model failed on purpose" in str(whole.value)
    seen = []
    with pytest.raises(openai.APIError) as streamed:
        for chunk in client.completions.create(model="echo_llm", prompt="!fail a b c", stream=True):
            seen.append(chunk.choices[0].text)
    assert seen == ["c"]
    assert "the model failed on purpose" in str(streamed.value)
    # Failing before its first piece: an error answer, not a stream (a decoupled model's
    # error comes over a gRPC stream without a status: 500).
    with pytest.raises(openai.InternalServerError) as first:
        client.completions.create(model="echo_llm", prompt="!failfirst a b", stream=True)
    assert "the model failed on purpose" in str(first.value)
    # The endpoint and the model serve on.
    assert client.completions.create(model="echo_llm", prompt="x y").choices[0].text == "y x"


def test_a_models_failure_is_not_run_again_by_the_sdk(
    endpoint: OpenAIServer, repository: Path
) -> None:
    """A decoupled model's error, whole and streamed, is a 500 (its INVALID_ARG too: the
    stream's error carries no status on 2.51, upstream.api_error) that says x-should-retry:
    false, so OpenAI's SDK with its default two retries runs the model once per request
    (without the header: three times)."""
    counted = repository / "echo_llm" / "refusals"
    counted.unlink(missing_ok=True)
    client = openai.OpenAI(base_url=endpoint.url, api_key="unused", max_retries=2, timeout=30)
    _CLIENTS.append(client)
    for stream in (False, True):
        with pytest.raises(openai.InternalServerError) as refused:
            client.completions.create(model="echo_llm", prompt="!refuse a", stream=stream)
        assert "the prompt is refused" in str(refused.value)
        assert refused.value.response.headers["x-should-retry"] == "false"
    assert counted.read_text() == "xx"
    assert client.completions.create(model="echo_llm", prompt="x y").choices[0].text == "y x"


def test_client_that_goes_away_cancels_the_request(
    endpoint: OpenAIServer, repository: Path
) -> None:
    marker = repository / "echo_llm" / "cancelled"
    marker.unlink(missing_ok=True)
    stream = sdk(endpoint).completions.create(model="echo_llm", prompt="!slow 200", stream=True)
    got = [next(iter(stream)).choices[0].text for _ in range(2)]
    assert got == ["w0", " w1"]
    stream.close()
    assert cancelled_after(marker) < 200


def test_a_client_gone_before_its_whole_answer_cancels_the_request(
    endpoint: OpenAIServer, repository: Path
) -> None:
    # Not streamed: the model's only response would come after 200 x 50 ms; the client
    # leaves after 0.5 s, and the endpoint, watching its socket, cancels the request.
    marker = repository / "echo_llm" / "cancelled"
    marker.unlink(missing_ok=True)
    leave_a_slow_whole_answer(
        lambda: socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)
    )
    assert cancelled_after(marker) < 100
    # The endpoint serves on.
    assert sdk(endpoint).completions.create(model="echo_llm", prompt="a b").choices[0].text


def test_a_model_slower_than_the_timeout_is_answered_504(triton: TritonServer) -> None:
    with OpenAIServer(triton.grpc_url, timeout=1) as impatient:
        with pytest.raises(openai.InternalServerError) as caught:
            sdk(impatient).completions.create(model="echo_llm", prompt="!sleep 3")
    assert caught.value.status_code == 504
    assert "no response within 1 s (--openai-timeout)" in str(caught.value)


def test_api_key_is_required_when_set(triton: TritonServer) -> None:
    with OpenAIServer(triton.grpc_url, api_key="s3cret", timeout=30) as guarded:
        with pytest.raises(openai.AuthenticationError) as caught:
            sdk(guarded, key="wrong").models.list()
        assert caught.value.code == "invalid_api_key"
        assert [m.id for m in sdk(guarded, key="s3cret").models.list()]
        # A refused POST leaves its body unread: the connection is closed, so the next
        # request on the same client is read as itself (not as the old body's bytes).
        http = HTTPConnection("127.0.0.1", guarded.port, timeout=30)
        try:
            ask = json.dumps({"model": "echo_llm", "prompt": "a b"})
            for key, status in ((None, 401), ("x", 401), ("s3cret", 200)):
                headers = {"Content-Type": "application/json"}
                if key is not None:
                    headers["Authorization"] = f"Bearer {key}"
                http.request("POST", "/v1/completions", ask, headers)
                answer = http.getresponse()
                body = json.loads(answer.read())
                assert answer.status == status, body
            assert body["choices"][0]["text"] == "b a"
            http.request("GET", "/health")  # no key needed
            assert json.loads(http.getresponse().read()) == {"ready": True}
        finally:
            http.close()


def test_embeddings_of_a_plain_embedding_model(endpoint: OpenAIServer) -> None:
    client = sdk(endpoint)
    texts = ["hello world", "abc", "a e i o u"]
    # OpenAI's SDK asks for base64 unless told otherwise, and decodes it itself.
    for encoding in ({}, {"encoding_format": "float"}):
        answer = client.embeddings.create(model="embed_plain", input=texts, **encoding)
        assert [d.index for d in answer.data] == [0, 1, 2]
        assert [list(d.embedding) for d in answer.data] == [
            [11, 2, 3, 104],
            [3, 1, 1, 97],
            [9, 5, 5, 97],
        ]
        assert (answer.usage.prompt_tokens, answer.usage.total_tokens) == (8, 8)
    one = client.embeddings.create(model="embed_plain", input="hello", dimensions=2)
    assert list(one.data[0].embedding) == [5, 1]


def test_many_texts_keep_their_order(endpoint: OpenAIServer) -> None:
    texts = [" ".join(["w"] * n) for n in range(1, 41)]  # more than run at once
    answer = sdk(endpoint).embeddings.create(model="embed_plain", input=texts)
    assert [d.embedding[1] for d in answer.data] == list(range(1, 41))


def test_embeddings_of_a_vllm_style_model(endpoint: OpenAIServer) -> None:
    client = sdk(endpoint)
    for encoding in ({}, {"encoding_format": "float"}):
        answer = client.embeddings.create(model="embed_vllm", input=["a b c", "xy"], **encoding)
        assert [list(d.embedding) for d in answer.data] == [[5, 3], [2, 1]]
        assert answer.usage.prompt_tokens == 4
    cut = client.embeddings.create(model="embed_vllm", input="a b c", dimensions=1)
    assert list(cut.data[0].embedding) == [5]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"model": "echo_llm", "input": "x"}, "BadRequestError", "has no output 'embedding'"),
        ({"model": "embed_plain", "input": [1, 2]}, "BadRequestError", "token ids"),
        ({"model": "embed_plain", "input": ["a", ""]}, "BadRequestError", "empty string"),
        ({"model": "nope", "input": "x"}, "NotFoundError", "`nope` does not exist"),
        (
            {"model": "embed_plain", "input": ["a", "!fail"]},
            "InternalServerError",
            "the model failed on purpose",
        ),
        (
            {"model": "embed_vllm", "input": "!generate-only"},
            "BadRequestError",
            "does not support 'embed' request: not an embedding model",
        ),
    ],
)
def test_embedding_refusals_and_failures(
    endpoint: OpenAIServer, kwargs: dict, error: str, words: str
) -> None:
    with pytest.raises(getattr(openai, error)) as caught:
        sdk(endpoint).embeddings.create(**kwargs)
    assert words in str(caught.value)


def test_a_failing_text_stops_the_others(endpoint: OpenAIServer, repository: Path) -> None:
    seen = repository / "embed_plain" / "seen"
    seen.unlink(missing_ok=True)
    texts = ["!fail"] + [f"t{i}" for i in range(200)]
    with pytest.raises(openai.InternalServerError) as caught:
        sdk(endpoint).embeddings.create(model="embed_plain", input=texts)
    assert "the model failed on purpose" in str(caught.value)
    # Every lane stops at its next text once one failed: far fewer than all ran.
    assert len(seen.read_text().split()) < 100
