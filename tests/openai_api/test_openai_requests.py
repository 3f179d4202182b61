"""OpenAI request bodies as the endpoint reads them: what it takes, and each refusal with the
field it names (OpenAI's ``param``)."""

from __future__ import annotations

import json

import pytest

from pybackend.openai_api.requests import ApiError, parse


def body(**fields) -> bytes:
    return json.dumps(fields).encode()


def test_a_completion() -> None:
    ask = parse(
        body(
            model="m",
            prompt=["hi"],
            max_tokens=4,
            stop="x",
            stream=True,
            stream_options={"include_usage": True},
            user="u1",
        ),
        chat=False,
    )
    assert (ask.model, ask.prompt, ask.stream, ask.include_usage) == ("m", "hi", True, True)
    assert ask.sampling == {"max_tokens": 4, "stop": ["x"]}


def test_a_chat_takes_max_completion_tokens() -> None:
    ask = parse(
        body(
            model="m",
            messages=[{"role": "user", "content": "x"}],
            max_completion_tokens=9,
            temperature=0,
        ),
        chat=True,
    )
    assert ask.chat and ask.messages[0]["role"] == "user"
    assert ask.sampling == {"max_tokens": 9, "temperature": 0}


def test_null_options_are_the_defaults_and_text_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]
    ask = parse(
        body(model="m", messages=[{"role": "user", "content": parts}], n=None, best_of=None),
        chat=True,
    )
    assert ask.messages == [{"role": "user", "content": "one two"}]


@pytest.mark.parametrize(
    ("raw", "chat", "param", "words"),
    [
        (b"{not json", False, None, "not JSON"),
        (b"[1]", False, None, "JSON object"),
        (body(prompt="x"), False, "model", "'model' is required"),
        (body(model="m", prompt=["a", "b"]), False, "prompt", "one request per prompt"),
        (body(model="m", prompt=[1, 2]), False, "prompt", "token ids"),
        (body(model="m", messages=[]), True, "messages", "non-empty list"),
        (body(model="m", messages=[{"content": "x"}]), True, "messages[0]", "'role'"),
        (body(model="m", prompt="x", max_tokens="3"), False, "max_tokens", "integer"),
        (body(model="m", prompt="x", max_tokens=0), False, "max_tokens", "at least 1"),
        (body(model="m", prompt="x", temperature="hot"), False, "temperature", "a number"),
        (body(model="m", prompt="x", stop=[1]), False, "stop", "list of strings"),
        (body(model="m", prompt="x", stream="yes"), False, "stream", "true or false"),
        (body(model="m", prompt="x", n=3), False, "n", "only n=1"),
        (
            body(model="m", messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
            True,
            "messages[0].content",
            "a part of type 'image_url': only text is served",
        ),
        (body(model="m", prompt="x", echo=True), False, "echo", "not repeated"),
        (body(model="m", prompt="x", logprobs=2), False, "logprobs", "not served"),
        (body(model="m", messages=[{"role": "user"}], tools=[{}]), True, "tools", "not served"),
        (
            body(model="m", prompt="x", response_format={"type": "json_object"}),
            False,
            "response_format",
            "'text'",
        ),
    ],
)
def test_refusals_name_the_field(raw: bytes, chat: bool, param, words: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse(raw, chat=chat)
    error = caught.value
    assert error.status == 400 and error.param == param and words in error.message
    assert error.body()["error"]["type"] == "invalid_request_error"
