"""BLS with torch (models/torch_bls calling models/plus_one): a BLS input made from a torch
tensor, the BLS output taken into torch (through __dlpack__ and through a to_dlpack()
capsule, from exec() and async_exec()) and still readable after the BLS response is gone
and after the request that made it finished."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer
from conformance_support.stub_env import needs_torch

pytestmark = needs_torch()

X = np.array([0.5, -3.25, 1e6, 7.0], np.float32)


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(["torch_bls", "plus_one"]) as srv:
        yield srv


def expected(x: np.ndarray) -> np.ndarray:
    return ((x * np.float32(2)) + np.float32(1)) * np.float32(10)


def ask(server, mode: str, x: np.ndarray, protocol: str = "http") -> np.ndarray:
    result = infer(server, protocol, "torch_bls", {"MODE": bytes_input(mode), "X": x})
    assert result.datatypes == {"Y": "FP32"}
    return result.outputs["Y"]


@pytest.mark.parametrize(
    "mode, protocol", [("protocol", "http"), ("protocol", "grpc"), ("capsule", "http")]
)
def test_a_bls_output_into_torch(server, mode: str, protocol: str):
    assert np.array_equal(ask(server, mode, X, protocol), expected(X))


def test_a_bls_output_into_torch_from_async_exec(server):
    assert np.array_equal(ask(server, "async", X), expected(X))


def test_a_bls_output_kept_as_a_torch_view_outlives_its_request(server):
    ask(server, "protocol", X)
    other = np.arange(64, dtype=np.float32)  # other BLS calls' buffers come and go
    for _ in range(3):
        assert np.array_equal(ask(server, "capsule", other), expected(other))
    assert np.array_equal(ask(server, "kept", X[:1]), expected(X))
