"""BLS ``timeout=`` (µs) reaches the core request on every path: a blocking ``exec()`` (on
ours the one that goes on the sync channel), one from another thread, and a decoupled one
(qa L0_backend_python/bls greps the server's verbose log for ``Request timeout:
11000000000``; qa python_models/bls ``test_timeout`` expects ``Request timeout expired``)."""

from __future__ import annotations

import pytest
from bls_support import run


@pytest.fixture(scope="module")
def server(feature_repository):
    models = ["bls_identity", "bls_stream", "bls_queue_timeout", "bls_caller"]
    start = feature_repository.start(
        model_control_mode="explicit", load_models=models, extra_args=["--log-verbose=1"]
    )
    with start as srv:
        yield srv


def test_the_callee_sees_the_timeout_on_every_path(server):
    result = run(server, "timeout_log")
    for how in ("blocking", "thread"):
        assert result[how]["outputs"] == {"OUTPUT0": [[3.0, 1.0]]}, result
    assert result["decoupled"][0]["outputs"] == {"OUTPUT0": [[3.0, 1.0]]}, result
    log = server.log_text()
    for value in ("11000000000", "12000000000", "13000000000"):
        assert f"Request timeout: {value}" in log, value  # the callee's own log line
        assert f"timeout (us): {value}" in log, value  # the core request (verbose log)


def test_an_expired_timeout_fails_the_call_on_every_path(server):
    result = run(server, "timeout_expired")
    for how in ("blocking", "decoupled", "blocking_thread"):
        assert "Request timeout expired" in result[how]["error"], (how, result)
