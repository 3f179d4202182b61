"""The BLS examples through a real tritonserver, over HTTP and gRPC: the
preprocess -> model -> postprocess pipeline and the async fan-out (examples/model_repository).

Runs against the original too (PYBACKEND_TEST_BACKEND=original): same answers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from integration_support.clients import InferClient

BLS_MODELS = ("bls_preprocess", "bls_postprocess", "bls_pipeline", "bls_async_fanout")


def test_bls_examples_ready(client: InferClient) -> None:
    for model in BLS_MODELS:
        assert client.client.is_model_ready(model), model


@pytest.mark.parametrize(
    "text, weights, label, scores",
    [
        ("hello world", [0, 0, 0, 0], "letters", [10, 0, 1, 0]),
        ("2026-11-23", [0, 0, 0, 0], "digits", [0, 8, 0, 2]),
        ("a  b  c", [0, 0, 0, 0], "spaces", [3, 0, 4, 0]),
        ("abc", [0, 0, 0, 5], "other", [3, 0, 0, 5]),
    ],
)
def test_pipeline(client: InferClient, text: str, weights: list, label: str, scores: list) -> None:
    out = client.infer(
        "bls_pipeline",
        {
            "TEXT": np.array([text.encode()], np.object_),
            "WEIGHTS": np.array(weights, np.float32),
        },
        ["LABEL", "SCORES"],
    )
    assert out["LABEL"].tolist() == [label.encode()]
    np.testing.assert_array_equal(out["SCORES"], np.array(scores, np.float32))


def test_pipeline_concurrent_clients(client: InferClient) -> None:
    def one(i: int) -> bytes:
        text = ("x" * i + " " * (2 * i)).encode()
        out = client.infer(
            "bls_pipeline",
            {"TEXT": np.array([text], np.object_), "WEIGHTS": np.zeros(4, np.float32)},
            ["LABEL"],
        )
        return out["LABEL"][0]

    with ThreadPoolExecutor(max_workers=4) as pool:
        labels = list(pool.map(one, range(1, 9)))
    assert labels == [b"spaces"] * 8


def test_async_fanout(client: InferClient) -> None:
    in0 = np.array([1, 2, 3, 4], np.float32)
    in1 = np.array([10, 20, 30, 40], np.float32)
    out = client.infer("bls_async_fanout", {"INPUT0": in0, "INPUT1": in1}, ["SUMS"])
    expected = np.stack([in0 + k * in1 for k in (1, 2, 3)])
    np.testing.assert_array_equal(out["SUMS"], expected)


def test_async_fanout_concurrent_clients(client: InferClient) -> None:
    def one(i: int) -> np.ndarray:
        in0 = np.full(4, i, np.float32)
        in1 = np.ones(4, np.float32)
        return client.infer("bls_async_fanout", {"INPUT0": in0, "INPUT1": in1}, ["SUMS"])["SUMS"]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, range(8)))
    for i, sums in enumerate(results):
        np.testing.assert_array_equal(sums[:, 0], [i + 1, i + 2, i + 3])
