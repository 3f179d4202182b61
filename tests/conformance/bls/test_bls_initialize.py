"""BLS from initialize(): ours allows it (user-voice UV-30); the original refuses it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import infer, text_output
from conformance_support.control import load


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=["bls_identity"])
    with start as srv:
        # Loaded once the server is up: BLS needs a ready server.
        load(srv, "bls_init_caller")
        yield srv


def init_result(server):
    reply = infer(server, "http", "bls_init_caller", {"INPUT0": np.zeros(1, np.float32)})
    return json.loads(text_output(reply, "RESULT"))


@pytest.mark.deviation("UV-30: BLS works from initialize (the original allows only execute)")
def test_bls_from_initialize(server):
    assert init_result(server) == {"OUTPUT1": [3.0, 5.0]}


@pytest.mark.deviation("the original refuses BLS outside execute", backend="original")
def test_original_refuses_bls_in_initialize(server):
    assert init_result(server) == {"raised": "BLS is only supported during the 'execute' function."}
