"""BLS from ``finalize`` (spec 2.3; qa L0_backend_python/bls with python_models/
bls_finalize_error): the call raises ``TritonModelException`` with the original's text, and
the exception that leaves ``finalize`` reaches the server log with that text."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import infer
from conformance_support.control import load, unload, wait_for

TEXT = "BLS is only supported during the 'execute' function."


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=["bls_stream"])
    with start as srv:
        yield srv


def test_bls_from_finalize_raises_the_originals_text(server):
    load(server, "bls_finalize_caller")
    reply = infer(server, "http", "bls_finalize_caller", {"INPUT0": np.ones(2, np.float32)})
    assert reply.outputs["OUTPUT0"].tolist() == [1.0, 1.0]
    unload(server, "bls_finalize_caller")
    wait_for(lambda: server.log_text().count(TEXT) >= 2, 30, "finalize's two refusals logged")
    log = server.log_text()
    assert f"bls_finalize_caller: TritonModelException: {TEXT}" in log
