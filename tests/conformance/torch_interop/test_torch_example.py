"""python_backend's examples/pytorch (models/pytorch, rewritten from its behaviour): a torch
nn.Module on the CPU serving the sum and difference of two FP32 [4] inputs, asked as the
example's client asks (random inputs, request id "1", both outputs requested), and its
finalize's print in the server's output once it is unloaded."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import infer
from conformance_support.control import unload, wait_for
from conformance_support.stub_env import needs_torch

pytestmark = needs_torch()


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(["pytorch"]) as srv:
        yield srv


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_pytorch_example_answers_sum_and_difference(server, protocol: str):
    rng = np.random.default_rng(7)
    first, second = (rng.random(4, dtype=np.float32) for _ in range(2))
    result = infer(
        server,
        protocol,
        "pytorch",
        {"INPUT0": first, "INPUT1": second},
        outputs=["OUTPUT0", "OUTPUT1"],
        request_id="1",
    )
    assert result.datatypes == {"OUTPUT0": "FP32", "OUTPUT1": "FP32"}
    assert np.array_equal(result.outputs["OUTPUT0"], first + second)
    assert np.array_equal(result.outputs["OUTPUT1"], first - second)


def test_finalize_prints_on_unload(server):
    assert "Cleaning up..." not in server.log_text()
    unload(server, "pytorch")
    wait_for(lambda: "Cleaning up..." in server.log_text(), 30.0, "finalize's print in the log")
