"""The vLLM-backend tensor convention read from a model's configuration: which models fit
(and the text when one does not), the tensors of a request, a response's piece."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pybackend.openai_api.convention import BadValue, NotATextModel, TextModel


def config(inputs, outputs=("text_output",), max_batch_size=0, decoupled=False):
    return {
        "name": "m",
        "max_batch_size": max_batch_size,
        "model_transaction_policy": {"decoupled": decoupled},
        "input": [
            {"name": n, "data_type": t, "dims": ["1"], "optional": opt} for n, t, opt in inputs
        ],
        "output": [{"name": n, "data_type": "TYPE_STRING", "dims": ["-1"]} for n in outputs],
    }


VLLM = [
    ("text_input", "TYPE_STRING", False),
    ("stream", "TYPE_BOOL", True),
    ("sampling_parameters", "TYPE_STRING", True),
    ("exclude_input_in_output", "TYPE_BOOL", True),
    ("return_finish_reason", "TYPE_BOOL", True),
]


def test_a_vllm_style_model_gets_every_tensor_it_declares() -> None:
    model = TextModel(config(VLLM, decoupled=True))
    assert model.decoupled and model.takes_prompt and model.needs_prompt
    tensors = model.tensors("hi", None, {"max_tokens": 3, "stop": ["x"]}, stream=True)
    assert sorted(tensors) == sorted(n for n, _, _ in VLLM)
    assert tensors["text_input"].tolist() == [b"hi"]
    assert tensors["stream"].dtype == np.bool_ and tensors["stream"].tolist() == [True]
    assert tensors["exclude_input_in_output"].tolist() == [True]
    assert json.loads(tensors["sampling_parameters"][0]) == {"max_tokens": 3, "stop": ["x"]}


def test_sampling_fields_as_tensors_of_the_declared_type_under_a_batch_dimension() -> None:
    model = TextModel(
        config(
            [
                ("text_input", "TYPE_STRING", False),
                ("max_tokens", "TYPE_INT32", True),
                ("temperature", "TYPE_FP32", True),
                ("stop", "TYPE_STRING", True),
            ],
            max_batch_size=8,
        )
    )
    tensors = model.tensors("hi", None, {"max_tokens": 7, "temperature": 0.5, "stop": ["x"]}, False)
    assert tensors["text_input"].shape == (1, 1)
    assert tensors["max_tokens"].dtype == np.int32 and tensors["max_tokens"].tolist() == [[7]]
    assert tensors["temperature"].dtype == np.float32
    assert "stop" not in tensors  # a list: only in sampling_parameters


def test_a_fields_absent_from_the_request_is_not_sent() -> None:
    model = TextModel(
        config([("text_input", "TYPE_STRING", False), ("max_tokens", "TYPE_INT32", True)])
    )
    assert sorted(model.tensors("hi", None, {}, False)) == ["text_input"]


def test_a_chat_model_gets_the_messages_as_json() -> None:
    model = TextModel(config([("messages", "TYPE_STRING", False)]))
    assert model.chats_itself and not model.takes_prompt and not model.needs_prompt
    said = [{"role": "user", "content": "hé"}]
    tensors = model.tensors(None, said, {}, False)
    assert json.loads(tensors["messages"][0]) == said


@pytest.mark.parametrize(
    ("inputs", "outputs", "words"),
    [
        ([("INPUT0", "TYPE_FP32", False)], ("text_output",), "has no input 'text_input'"),
        ([("text_input", "TYPE_STRING", False)], ("OUT",), "has no output 'text_output'"),
        (
            [("text_input", "TYPE_STRING", False), ("image", "TYPE_UINT8", False)],
            ("text_output",),
            "required inputs this endpoint cannot fill: 'image'",
        ),
        ([("text_input", "TYPE_INT32", False)], ("text_output",), "is TYPE_INT32, not TYPE_STRING"),
        # A fraction into an integer would be truncated: temperature 0.7 as 0.
        (
            [("text_input", "TYPE_STRING", False), ("temperature", "TYPE_INT32", True)],
            ("text_output",),
            "input 'temperature' is TYPE_INT32, not a floating-point type",
        ),
        (
            [("text_input", "TYPE_STRING", False), ("seed", "TYPE_FP32", True)],
            ("text_output",),
            "input 'seed' is TYPE_FP32, not an integer type",
        ),
        (
            [("text_input", "TYPE_STRING", False), ("stream", "TYPE_BF16", True)],
            ("text_output",),
            "input 'stream' is TYPE_BF16, not TYPE_BOOL",
        ),
        # ``stop`` is a list: never sent as a tensor, so a model needing one cannot be served.
        (
            [("text_input", "TYPE_STRING", False), ("stop", "TYPE_STRING", False)],
            ("text_output",),
            "required inputs this endpoint cannot fill: 'stop'",
        ),
    ],
)
def test_models_outside_the_convention_are_named_with_why(inputs, outputs, words) -> None:
    with pytest.raises(NotATextModel) as caught:
        TextModel(config(inputs, outputs))
    assert str(caught.value).startswith("model 'm' ") and words in str(caught.value)


def test_an_input_of_several_elements_is_refused() -> None:
    raw = config([("text_input", "TYPE_STRING", False)])
    raw["input"][0]["dims"] = ["2"]
    with pytest.raises(NotATextModel, match=r"'text_input' has dims \[2\]: one element is sent"):
        TextModel(raw)


def test_a_required_sampling_input_the_request_lacks_is_the_request_s_fault() -> None:
    model = TextModel(
        config([("text_input", "TYPE_STRING", False), ("max_tokens", "TYPE_INT32", False)])
    )
    with pytest.raises(BadValue) as caught:
        model.tensors("hi", None, {}, False)
    assert caught.value.param == "max_tokens"
    assert str(caught.value) == (
        "model 'm' needs its input 'max_tokens', which this request does not give: "
        "give 'max_tokens' in the request"
    )
    assert model.tensors("hi", None, {"max_tokens": 5}, False)["max_tokens"].tolist() == [5]


def test_a_value_outside_the_input_s_type_is_refused_not_wrapped() -> None:
    model = TextModel(config([("text_input", "TYPE_STRING", False), ("seed", "TYPE_INT32", True)]))
    with pytest.raises(BadValue) as caught:
        model.tensors("hi", None, {"seed": 2**40}, False)
    assert caught.value.param == "seed"
    assert "seed 1099511627776 is out of the range of model 'm''s input (TYPE_INT32" in str(
        caught.value
    )
    assert model.tensors("hi", None, {"seed": -(2**31)}, False)["seed"].tolist() == [-(2**31)]


def test_an_optional_input_outside_the_convention_is_left_out() -> None:
    model = TextModel(config(VLLM + [("image", "TYPE_STRING", True)]))
    assert "image" not in model.tensors("hi", None, {}, False)


def test_a_piece_reads_text_reason_and_counts() -> None:
    model = TextModel(config(VLLM))
    piece = model.piece(
        {
            "text_output": np.array([b"h\xc3\xa9", b"llo"], dtype=np.object_),
            "finish_reason": np.array([b"length"], dtype=np.object_),
            "num_input_tokens": np.array([4], np.uint32),
            "num_output_tokens": np.array([2], np.uint32),
        }
    )
    assert (piece.text, piece.finish_reason, piece.input_tokens, piece.output_tokens) == (
        "héllo",
        "length",
        4,
        2,
    )
    # vLLM writes str(None) while a sequence is unfinished.
    unfinished = model.piece(
        {
            "text_output": np.array([b"x"], np.object_),
            "finish_reason": np.array([b"None"], np.object_),
        }
    )
    assert unfinished.finish_reason is None and unfinished.input_tokens is None
