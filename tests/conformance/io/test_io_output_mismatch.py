"""Outputs whose data type or shape differ from config.pbtxt reach the client as the model
made them (issue 19 item 1): the original hands each tensor to Triton as it is, and NVIDIA's
own models rely on it (examples/bls_decoupled returns INT64 for a TYPE_INT32 output)."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer

EXPECTED = {
    # mode: (output, client datatype, the array the client decodes)
    "int64": ("OUT", "INT64", np.array([1, 2, 3], np.int64)),
    "fp16": ("OUT", "FP16", np.array([0.5, -1.0], np.float16)),
    "bool": ("OUT", "BOOL", np.array([True, False])),
    "bytes": ("OUT", "BYTES", np.array([b"a", b"bc"], np.object_)),
    "rank": ("OUT", "FP32", np.arange(4, dtype=np.float32).reshape(2, 2)),
    "scalar": ("OUT", "FP32", np.array(2.5, np.float32)),
    "fixed_shape": ("FIXED", "INT32", np.array([1, 2, 3], np.int32)),
    "matching": ("OUT", "FP32", np.array([1.5], np.float32)),
}


@pytest.fixture(scope="module")
def server(feature_repository):
    models = ["output_mismatch", "warmup_mismatch"]
    start = feature_repository.start(model_control_mode="explicit", load_models=models)
    with start as srv:
        yield srv


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("path", ["", "send_"])
@pytest.mark.parametrize("mode", list(EXPECTED))
def test_output_passes_as_the_model_made_it(server, protocol, path, mode):
    name, datatype, want = EXPECTED[mode]
    result = infer(server, protocol, "output_mismatch", {"MODE": bytes_input(path + mode)}, [name])
    got = result.outputs[name]
    assert result.datatypes[name] == datatype
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


def test_warmup_sample_with_a_mismatched_output_loads(server):
    """The warmup sample's response has an INT64 output under TYPE_FP32: the load does not
    fail on it, and the warmup request ran before the first client's."""
    result = infer(server, "http", "warmup_mismatch", {"X": np.array([1.0, 2.0], np.float32)})
    assert result.datatypes["Y"] == "INT64"
    assert result.outputs["Y"].tolist() == [3, 4]  # x + 2: the warmup was execute 1
