"""OpenAI's answer shapes built from a model's pieces, and chat templates."""

from __future__ import annotations

import json

import pytest

from pybackend.errors import PybackendError
from pybackend.openai_api.answers import DONE, Answer, event
from pybackend.openai_api.chat import ChatTemplate
from pybackend.openai_api.convention import Piece


def test_a_whole_completion_with_usage() -> None:
    answer = Answer(chat=False, model="m")
    answer.add(Piece("he", input_tokens=3, output_tokens=1))
    answer.add(Piece("llo", finish_reason="length", input_tokens=3, output_tokens=2))
    whole = answer.whole()
    assert whole["object"] == "text_completion" and whole["id"].startswith("cmpl-")
    assert whole["choices"] == [
        {"index": 0, "finish_reason": "length", "logprobs": None, "text": "hello"}
    ]
    assert whole["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}


def test_the_prompt_count_given_only_in_the_first_response_stands() -> None:
    answer = Answer(chat=False, model="m")
    answer.add(Piece("a", input_tokens=3, output_tokens=1))
    answer.add(Piece("b", input_tokens=0, output_tokens=1))  # later responses: 0
    assert answer.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_a_chat_answer_without_counts_has_no_usage() -> None:
    answer = Answer(chat=True, model="m")
    answer.add(Piece("hi"))
    whole = answer.whole()
    assert whole["object"] == "chat.completion" and "usage" not in whole
    assert whole["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert whole["choices"][0]["finish_reason"] == "stop"


def test_chat_chunks_role_then_content_then_end() -> None:
    answer = Answer(chat=True, model="m")
    first, middle, last = answer.chunk(None), answer.chunk("x"), answer.chunk(None, "stop")
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant"}
    assert middle["choices"][0]["delta"] == {"content": "x"}
    assert last["choices"][0] == {
        "index": 0,
        "finish_reason": "stop",
        "logprobs": None,
        "delta": {},
    }
    assert event(middle).startswith(b"data: {") and event(middle).endswith(b"\n\n")
    assert json.loads(event(middle)[6:]) == middle
    assert DONE == b"data: [DONE]\n\n"


def test_a_chat_template_renders_with_the_generation_prompt() -> None:
    template = ChatTemplate(
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}",
        "t",
    )
    assert template.render([{"role": "user", "content": "hi"}]) == "[user]hi[assistant]"


def test_a_template_that_refuses_says_so_in_its_words() -> None:
    template = ChatTemplate(
        "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}",
        "t.jinja",
    )
    with pytest.raises(ValueError, match="t.jinja refused the messages: first must be user"):
        template.render([{"role": "system", "content": "x"}])


def test_a_template_cannot_reach_python_internals() -> None:
    template = ChatTemplate("{{ messages.__class__.__mro__ }}", "t")
    with pytest.raises(ValueError, match="refused"):
        template.render([])


def test_a_broken_template_is_refused_when_loaded() -> None:
    with pytest.raises(PybackendError, match="not a valid Jinja template"):
        ChatTemplate("{% for %}", "bad.jinja")


def test_a_template_gets_hugging_face_s_loop_controls_tojson_and_strftime_now() -> None:
    template = ChatTemplate(
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{{ m | tojson }}{% endfor %}|{{ strftime_now('%Y') | length }}",
        "hf",
    )
    said = template.render([{"role": "user", "content": "hé"}, {"role": "user", "content": "x"}])
    assert said == '{"role": "user", "content": "hé"}|4'


def test_a_template_that_cannot_read_a_message_refuses_it() -> None:
    template = ChatTemplate("{{ messages[0]['content'] + '!' }}", "plain")
    with pytest.raises(ValueError, match="the chat template plain refused the messages"):
        template.render([{"role": "user", "content": [{"type": "image_url"}]}])
    with pytest.raises(ValueError, match="refused the messages"):
        template.render([{"role": "user"}])  # no content: an undefined + '!' is a TypeError
