"""NVIDIA's qa/python_models/dlpack_test on the CPU (L0_backend_python/dlpack), with torch:
the model (models/torch_qa) runs the checks and reports each one; all pass on both backends."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import infer, text_output
from conformance_support.stub_env import needs_torch

pytestmark = needs_torch()

DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
WAYS = ("capsule", "__dlpack__", "numpy_consumer", "numpy_made")


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(["torch_qa"]) as srv:
        yield srv


def test_every_dlpack_check_passes(server):
    result = infer(server, "http", "torch_qa", {"RUN": np.array([1], np.int32)})
    report = json.loads(text_output(result, "REPORT"))
    expected = [f"{d}/{w}" for d in DTYPES for w in WAYS]
    expected += ["bfloat16", "non_contiguous_error", "string_tensor_error"]
    assert list(report) == expected
    assert {name: outcome for name, outcome in report.items() if outcome != "ok"} == {}
