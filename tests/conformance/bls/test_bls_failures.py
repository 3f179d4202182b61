"""BLS when a stub dies: a callee that crashes answers the call with an error response,
and a caller that dies with calls in flight (a stream, or a blocking call that waits on
the sync channel) leaves the server (and the callee) working."""

from __future__ import annotations

import time

import numpy as np
import pytest
from bls_support import CALLEES, run
from tritonclient.utils import InferenceServerException

from conformance_support.clients import infer
from conformance_support.control import is_ready, wait_for

pytestmark = pytest.mark.deviation(
    "ours restarts a dead stub and fails what waited on it at once; the original notices a "
    "dead stub only through its health check and does not restart it"
)


@pytest.fixture(scope="module")
def server(feature_repository):
    models = CALLEES + ["bls_crash", "bls_caller", "bls_slow"]
    start = feature_repository.start(model_control_mode="explicit", load_models=models)
    with start as srv:
        yield srv


def test_crashing_callee_is_an_error_response(server):
    result = run(server, "crashing_callee")
    assert result["code"] == 1
    assert "Stub process 'bls_crash_0' is not healthy" in result["error"], result
    assert "exit code 3" in result["error"] or "exited with" in result["error"], result
    wait_for(lambda: is_ready(server, "bls_crash"), 30, "bls_crash restarted")


def test_caller_dying_with_a_stream_in_flight(server):
    started = time.monotonic()
    with pytest.raises(InferenceServerException):
        run(server, "die_during_stream")
    # The caller's stub comes back and BLS works again (its calls in flight were cancelled).
    wait_for(lambda: is_ready(server, "bls_caller"), 30, "bls_caller restarted")
    wait_for(lambda: _sync_works(server), 30, "BLS after the restart")
    assert time.monotonic() - started < 30
    assert run(server, "stream", [2])["responses"][-1] == {"outputs": {}, "parameters": {}}


def test_caller_dying_during_a_blocking_call(server):
    with pytest.raises(InferenceServerException) as info:
        run(server, "die_during_sync_call")
    assert "bls_caller_0" in str(info.value), info.value
    wait_for(lambda: is_ready(server, "bls_caller"), 30, "bls_caller restarted")
    wait_for(lambda: _sync_works(server), 30, "BLS after the restart")
    # The callee, whose answer found the caller gone, still serves.
    slow = infer(server, "http", "bls_slow", {"INPUT0": np.array([7.0], np.float32)})
    assert slow.outputs["OUTPUT0"].tolist() == [7.0]


def _sync_works(server) -> bool:
    try:
        return run(server, "sync")["outputs"]["OUTPUT0"] == [3.0, 1.0]
    except InferenceServerException:
        return False
