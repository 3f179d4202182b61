"""Outputs that cost at most one copy (UV-12): ``pb_utils.Tensor.empty`` (a pybackend
extension) hands out shared memory, and an output that is a view of an input is
referenced where it lies; only the backend's copy into Triton's buffer remains."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import infer

pytestmark = pytest.mark.deviation(
    "pybackend extension (UV-12): the original has no Tensor.empty", backend="ours"
)


@pytest.fixture(scope="module")
def server(feature_repository):
    models = ["shm_outputs"]
    with feature_repository.start(model_control_mode="explicit", load_models=models) as srv:
        yield srv


def test_tensor_empty_and_input_views_are_not_copied_by_the_stub(server):
    x = np.arange(2 << 20, dtype=np.float32)  # 8 MiB: far above the inline threshold
    first = infer(server, "http", "shm_outputs", {"IN": x})
    np.testing.assert_array_equal(first.outputs["OUT_EMPTY"], x * 2)
    np.testing.assert_array_equal(first.outputs["OUT_VIEW"], x)
    np.testing.assert_array_equal(first.outputs["OUT_COPY"], x + 1)
    assert first.outputs["WHERE"][0].startswith(b"/memfd:pybackend")
    # The next request reports the copies made while placing the first one's outputs:
    # OUT_COPY (a fresh numpy array) only. OUT_EMPTY and OUT_VIEW were referenced.
    second = infer(server, "http", "shm_outputs", {"IN": np.ones(4, np.float32)})
    assert second.outputs["COPIES"].tolist() == [1]
    np.testing.assert_array_equal(second.outputs["OUT_EMPTY"], np.full(4, 2, np.float32))


def test_tensor_empty_of_size_zero(server):
    result = infer(server, "http", "shm_outputs", {"IN": np.zeros(0, np.float32)})
    assert result.outputs["OUT_EMPTY"].shape == (0,)
