"""An optional input (models/opt_batched) under the dynamic batcher: a request without it,
get_input_tensor_by_name returning None, and requests with and without it sent together
(the batcher never puts them in one batch)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer

MODEL = "opt_batched"


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL]) as srv:
        yield srv


def send(server, protocol, a, b=None):
    inputs = {"A": np.array(a, np.int32)}
    if b is not None:
        inputs["B"] = np.array(b, np.int32)
    result = infer(server, protocol, MODEL, inputs)
    return result.outputs["SUM"].tolist(), json.loads(result.outputs["INFO"].reshape(-1)[0])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_without_the_optional_input(server, protocol):
    total, info = send(server, protocol, [[1, 2]])
    assert total == [[1, 2]]
    assert info == {"b": "None", "a_shape": [1, 2], "batch": [["A"]]}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_with_the_optional_input(server, protocol):
    total, info = send(server, protocol, [[1, 2], [3, 4]], [[10, 20], [30, 40]])
    assert total == [[11, 22], [33, 44]]
    assert info == {"b": [[2, 2], [[10, 20], [30, 40]]], "a_shape": [2, 2], "batch": [["A", "B"]]}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_requests_with_and_without_it_are_batched_apart(server, protocol):
    plan = [(i, [[i, i]], [[100, 100]] if i % 2 else None) for i in range(6)]
    with ThreadPoolExecutor(len(plan)) as pool:
        answers = list(pool.map(lambda p: send(server, protocol, p[1], p[2]), plan))
    for (i, _, b), (total, info) in zip(plan, answers, strict=True):
        assert total == ([[i + 100, i + 100]] if b else [[i, i]])
        assert info["b"] == ("None" if b is None else [[1, 2], b])
        # Every request of a batch has the same inputs as this one.
        assert {tuple(names) for names in info["batch"]} == {("A", "B") if b else ("A",)}
