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


def _concurrent(
    client: InferClient, model: str, requests: list[dict[str, np.ndarray]], output: str
) -> list[np.ndarray]:
    """Send every request at once; ``output`` of each, in order."""
    if client.protocol == "http":
        # tritonclient.http is gevent based: use its own async API rather than threads.
        pending = [
            client.client.async_infer(
                model, client.inputs(arrays), outputs=client.outputs([output])
            )
            for arrays in requests
        ]
        return [p.get_result(timeout=60).as_numpy(output) for p in pending]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda a: client.infer(model, a, [output])[output], requests))


def test_pipeline_concurrent_clients(client: InferClient) -> None:
    requests = [
        {
            "TEXT": np.array([("x" * i + " " * (2 * i)).encode()], np.object_),
            "WEIGHTS": np.zeros(4, np.float32),
        }
        for i in range(1, 9)
    ]
    labels = [label[0] for label in _concurrent(client, "bls_pipeline", requests, "LABEL")]
    assert labels == [b"spaces"] * 8


def test_async_fanout(client: InferClient) -> None:
    in0 = np.array([1, 2, 3, 4], np.float32)
    in1 = np.array([10, 20, 30, 40], np.float32)
    out = client.infer("bls_async_fanout", {"INPUT0": in0, "INPUT1": in1}, ["SUMS"])
    expected = np.stack([in0 + k * in1 for k in (1, 2, 3)])
    np.testing.assert_array_equal(out["SUMS"], expected)


def test_async_fanout_concurrent_clients(client: InferClient) -> None:
    requests = [
        {"INPUT0": np.full(4, i, np.float32), "INPUT1": np.ones(4, np.float32)} for i in range(8)
    ]
    results = _concurrent(client, "bls_async_fanout", requests, "SUMS")
    for i, sums in enumerate(results):
        np.testing.assert_array_equal(sums[:, 0], [i + 1, i + 2, i + 3])
