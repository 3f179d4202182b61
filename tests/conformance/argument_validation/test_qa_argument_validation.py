"""NVIDIA's qa/L0_backend_python/argument_validation: its in-model checks (request, response,
tensor and logger arguments: TypeError for a wrong type, TritonModelException for a None in
a list of tensors) and python_backend's examples/bls call with a numpy.bytes_ model name, run
by models/qa_argval; every check must go as the original's tests expect."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import infer, text_output


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(
        model_control_mode="explicit", load_models=["qa_argval", "argtarget"]
    ) as srv:
        yield srv


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_every_qa_check_passes(server, protocol):
    # The model name travels as a BYTES element: model.py gets it as numpy.bytes_.
    name = np.array([b"argtarget"], dtype=np.object_)
    result = infer(server, protocol, "qa_argval", {"MODEL_NAME": name})
    assert text_output(result, "FAILURES") == ""
