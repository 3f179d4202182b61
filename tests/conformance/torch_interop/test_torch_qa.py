"""NVIDIA's qa/python_models/dlpack_test on the CPU (L0_backend_python/dlpack), with torch:
the model (models/torch_qa) runs the checks and reports each one; all pass on both backends.
And qa python_test.py test_infer_pytorch: a torch network initialised from seed 0 answers a
zero image with the log-probabilities that test expects (models/qa_pytorch_fp32)."""

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
    with feature_repository.start_models(["torch_qa", "qa_pytorch_fp32"]) as srv:
        yield srv


def test_every_dlpack_check_passes(server):
    result = infer(server, "http", "torch_qa", {"RUN": np.array([1], np.int32)})
    report = json.loads(text_output(result, "REPORT"))
    expected = [f"{d}/{w}" for d in DTYPES for w in WAYS]
    expected += ["bfloat16", "non_contiguous_error", "string_tensor_error"]
    assert list(report) == expected
    assert {name: outcome for name, outcome in report.items() if outcome != "ok"} == {}


#: What qa test_infer_pytorch expects for a zero [1, 1, 28, 28] image.
SEED_0_ON_ZEROS = [
    -2.2377274,
    -2.3976364,
    -2.2464046,
    -2.2790744,
    -2.3828976,
    -2.2940576,
    -2.2928185,
    -2.340665,
    -2.275219,
    -2.292135,
]


def test_a_torch_network_answers_what_the_qa_test_expects(server):
    result = infer(server, "http", "qa_pytorch_fp32", {"IN": np.zeros((1, 1, 28, 28), np.float32)})
    assert result.datatypes["OUT"] == "FP32"
    assert result.outputs["OUT"].shape == (1, 10)
    assert np.allclose(result.outputs["OUT"][0], SEED_0_ON_ZEROS)
