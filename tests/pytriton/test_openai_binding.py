"""A PyTriton user's generator bound in the text convention (text_input -> text_output,
docs/openai.md) answers OpenAI's SDK through `pybackend openai`'s endpoint: one process
for the model, tritonserver, and the endpoint in front of its gRPC port."""

from __future__ import annotations

import json
from typing import Dict, Iterator, List

import numpy as np
import pytest

openai = pytest.importorskip("openai")

from integration_support.pytriton_helpers import urls  # noqa: E402
from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.pytriton.model_config import ModelConfig, Tensor  # noqa: E402
from pybackend.pytriton.triton import Triton  # noqa: E402


def _words(requests: List[Dict[str, np.ndarray]]) -> Iterator[List[Dict[str, np.ndarray]]]:
    """The prompt's words reversed, one response each, at most max_tokens of them."""
    request = requests[0]
    prompt = request["text_input"].reshape(-1)[0].decode()
    sampling = json.loads(request["sampling_parameters"].reshape(-1)[0] or b"{}")
    words = list(reversed(prompt.split()))[: sampling.get("max_tokens")]
    for i, word in enumerate(words):
        piece = (" " if i else "") + word
        yield [{"text_output": np.array([[piece.encode()]], np.object_)}]


def test_a_bound_generator_answers_openai_clients(triton: Triton) -> None:
    triton.bind(
        "words",
        _words,
        inputs=[
            Tensor(name="text_input", dtype=bytes, shape=(1,)),
            Tensor(name="sampling_parameters", dtype=bytes, shape=(1,), optional=True),
        ],
        outputs=[Tensor(name="text_output", dtype=bytes, shape=(1,))],
        config=ModelConfig(max_batch_size=4, decoupled=True),
    )
    triton.run()
    # PyTriton's server restricts model-repository (the endpoint lists models through it)
    # to its token: the endpoint sends it with every call.
    token = {"triton-grpc-protocol-triton-access-token": triton.get_access_token()}
    with (
        OpenAIServer(urls(triton)[1], timeout=30, triton_headers=token) as api,
        openai.OpenAI(base_url=api.url, api_key="unused", max_retries=0) as client,
    ):
        assert [m.id for m in client.models.list()] == ["words"]
        chunks = client.completions.create(
            model="words", prompt="one two three", max_tokens=2, stream=True
        )
        pieces = [c.choices[0].text for c in chunks]
        whole = client.completions.create(model="words", prompt="a b c")
    assert pieces == ["three", " two", ""]  # the last: the end, with its finish reason
    assert whole.choices[0].text == "c b a"
