"""The embedding conventions read from a model's configuration (the vLLM backend's and the
plain one), an embeddings request read and checked, and the answer's two encodings."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from pybackend.openai_api.answers import embeddings_answer
from pybackend.openai_api.embedding import BadVector, EmbeddingModel, NotAnEmbeddingModel
from pybackend.openai_api.model_io import BadValue
from pybackend.openai_api.requests import ApiError, parse_embeddings


def config(inputs, outputs, max_batch_size=0):
    return {
        "name": "e",
        "max_batch_size": max_batch_size,
        "input": [
            {"name": n, "data_type": t, "dims": ["1"], "optional": opt} for n, t, opt in inputs
        ],
        "output": [{"name": n, "data_type": t, "dims": ["-1"]} for n, t in outputs],
    }


PLAIN = config(
    [
        ("text_input", "TYPE_STRING", False),
        ("dimensions", "TYPE_INT32", True),
        ("return_num_input_tokens", "TYPE_BOOL", True),
    ],
    [("embedding", "TYPE_FP32"), ("num_input_tokens", "TYPE_UINT32")],
    max_batch_size=8,
)
VLLM = config(
    [("text_input", "TYPE_STRING", False), ("embedding_request", "TYPE_STRING", True)],
    [("text_output", "TYPE_STRING")],
)


def test_a_plain_model_gets_its_text_length_and_flag() -> None:
    model = EmbeddingModel(PLAIN)
    assert not model.vllm
    tensors = model.tensors("hi there", 2)
    assert tensors["text_input"].tolist() == [[b"hi there"]]  # under the batch dimension
    assert tensors["dimensions"].dtype == np.int32 and tensors["dimensions"].tolist() == [[2]]
    assert tensors["return_num_input_tokens"].tolist() == [[True]]
    vector, tokens = model.vector(
        {"embedding": np.array([[1, 2.5]], np.float16), "num_input_tokens": np.array([[2]])}
    )
    assert vector.dtype == np.float32 and vector.tolist() == [1.0, 2.5] and tokens == 2


def test_a_plain_model_without_a_dimensions_input_cannot_shorten() -> None:
    model = EmbeddingModel(
        config([("text_input", "TYPE_STRING", False)], [("embedding", "TYPE_FP32")])
    )
    assert sorted(model.tensors("x", None)) == ["text_input"]
    with pytest.raises(BadValue) as caught:
        model.tensors("x", 3)
    assert caught.value.param == "dimensions" and "has no input 'dimensions'" in str(caught.value)


def test_a_vllm_style_model_gets_the_request_as_json_beside_the_text() -> None:
    model = EmbeddingModel(VLLM)
    assert model.vllm
    tensors = model.tensors("a b", 4)
    assert tensors["text_input"].tolist() == [b"a b"]
    assert json.loads(tensors["embedding_request"][0]) == {
        "input": "a b",
        "pooling_params": {"dimensions": [4]},
    }
    assert json.loads(model.tensors("a b", None)["embedding_request"][0]) == {"input": "a b"}
    vector, tokens = model.vector({"text_output": np.array([b"[0.5, 1]"], np.object_)})
    assert vector.tolist() == [0.5, 1.0] and tokens is None


@pytest.mark.parametrize(
    ("inputs", "outputs", "words"),
    [
        ([("INPUT0", "TYPE_FP32", False)], [("embedding", "TYPE_FP32")], "no input 'text_input'"),
        ([("text_input", "TYPE_STRING", False)], [("OUT", "TYPE_FP32")], "no output 'embedding'"),
        (
            [("text_input", "TYPE_STRING", False)],
            [("embedding", "TYPE_INT32")],
            "output 'embedding' is TYPE_INT32, not a floating-point type",
        ),
        (
            [("embedding_request", "TYPE_STRING", False)],
            [("embedding", "TYPE_FP32")],
            "no output 'text_output' (the vector as JSON)",
        ),
        (
            [("text_input", "TYPE_STRING", False), ("dimensions", "TYPE_FP32", True)],
            [("embedding", "TYPE_FP32")],
            "input 'dimensions' is TYPE_FP32, not an integer type",
        ),
        (
            [("text_input", "TYPE_STRING", False), ("image", "TYPE_UINT8", False)],
            [("embedding", "TYPE_FP32")],
            "required inputs this endpoint cannot fill: 'image'",
        ),
        (
            [("embedding_request", "TYPE_STRING", True), ("dimensions", "TYPE_INT32", False)],
            [("text_output", "TYPE_STRING")],
            "requires 'dimensions', which the vLLM convention never sends",
        ),
    ],
)
def test_models_outside_both_conventions_are_named_with_why(inputs, outputs, words) -> None:
    with pytest.raises(NotAnEmbeddingModel) as caught:
        EmbeddingModel(config(inputs, outputs))
    assert str(caught.value).startswith("model 'e' ") and words in str(caught.value)


def body(**fields) -> bytes:
    return json.dumps(fields).encode()


def test_an_embeddings_request() -> None:
    ask = parse_embeddings(body(model="e", input="one", dimensions=8, user="u"))
    assert (ask.model, ask.texts, ask.dimensions, ask.base64) == ("e", ["one"], 8, False)
    many = parse_embeddings(body(model="e", input=["a", "b"], encoding_format="base64"))
    assert many.texts == ["a", "b"] and many.base64


@pytest.mark.parametrize(
    ("fields", "param", "words"),
    [
        ({"input": "x"}, "model", "'model' is required"),
        ({"model": "e", "input": [[1, 2]]}, "input", "token ids are not served"),
        ({"model": "e", "input": []}, "input", "1 to 2048 texts"),
        ({"model": "e", "input": ["x"] * 2049}, "input", "1 to 2048 texts"),
        ({"model": "e", "input": ""}, "input", "empty string"),
        ({"model": "e", "input": "x", "dimensions": 0}, "dimensions", "above 0"),
        ({"model": "e", "input": "x", "dimensions": True}, "dimensions", "above 0"),
        ({"model": "e", "input": "x", "encoding_format": "int8"}, "encoding_format", "'float'"),
    ],
)
def test_embeddings_refusals_name_the_field(fields, param, words) -> None:
    with pytest.raises(ApiError) as caught:
        parse_embeddings(body(**fields))
    assert caught.value.status == 400 and caught.value.param == param
    assert words in caught.value.message


def test_the_answer_as_floats_or_base64_of_little_endian_float32() -> None:
    vectors = [np.array([1.5, -2], np.float32), np.array([0.25], np.float32)]
    plain = embeddings_answer("e", vectors, 5, base64=False)
    assert plain == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": [1.5, -2.0]},
            {"object": "embedding", "index": 1, "embedding": [0.25]},
        ],
        "model": "e",
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }
    packed = embeddings_answer("e", vectors, 0, base64=True)
    # OpenAI's answer requires usage: 0 where the model counts nothing.
    assert packed["usage"] == {"prompt_tokens": 0, "total_tokens": 0}
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in packed["data"]]
    assert [v.tolist() for v in decoded] == [[1.5, -2.0], [0.25]]


def test_an_unpooled_output_is_refused_when_read() -> None:
    raw = config([("text_input", "TYPE_STRING", False)], [("embedding", "TYPE_FP32")])
    raw["output"][0]["dims"] = ["-1", "768"]  # a vector per token
    with pytest.raises(NotAnEmbeddingModel, match=r"dims \[-1, 768\]: one vector a text"):
        EmbeddingModel(raw)


@pytest.mark.parametrize(
    ("outputs", "dimensions", "words"),
    [
        ({}, None, "answered without 'embedding'"),
        ({"embedding": np.zeros((1, 0), np.float32)}, None, "an empty vector"),
        ({"embedding": np.array([[1, np.nan]], np.float32)}, None, "NaN or infinity"),
        ({"embedding": np.array([[1e300]], np.float64)}, None, "NaN or infinity"),
        ({"embedding": np.ones((2, 3), np.float32)}, None, "of shape [2, 3], not one vector"),
        ({"embedding": np.ones((1, 3), np.float32)}, 2, "3 values for dimensions=2"),
    ],
)
def test_a_plain_answer_that_is_not_one_vector_is_refused(outputs, dimensions, words) -> None:
    model = EmbeddingModel(PLAIN)
    with pytest.raises(BadVector) as caught:
        model.vector(outputs, dimensions)
    assert str(caught.value).startswith("model 'e' answered") and words in str(caught.value)


@pytest.mark.parametrize(
    "said", [b"null", b"{}", b"[1, [2]]", b"[true]", b"not json", b"[1e999]", b"[]"]
)
def test_a_vllm_answer_that_is_not_a_list_of_numbers_is_refused(said: bytes) -> None:
    with pytest.raises(BadVector):
        EmbeddingModel(VLLM).vector({"text_output": np.array([said], np.object_)})
