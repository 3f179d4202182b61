"""Default (non-decoupled) mode answered through the response sender after execute
returned None (spec 4.3): the model keeps the sender and a thread sends the one response
later. A sender taken and dropped without an answer ends the request with an error."""

from __future__ import annotations

import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error

MODELS = ["default_sender"]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


def run(server, protocol, mode, **kwargs):
    return infer(server, protocol, "default_sender", {"MODE": bytes_input(mode)}, **kwargs)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mode,value", [("thread_final", 21), ("thread_two_step", 22)])
def test_thread_answers_after_execute_returned_none(server, protocol, mode, value):
    result = run(server, protocol, mode, client_timeout=20)
    assert result.outputs["OUT"].tolist() == [value]


@pytest.mark.deviation(
    "original: a request whose sender was taken but dropped unused leaves the client "
    "waiting forever; ours ends it with an error (UV-10)"
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sender_dropped_unused_gets_an_error(server, protocol):
    error = infer_error(
        server,
        protocol,
        "default_sender",
        {"MODE": bytes_input("dropped_unused")},
        client_timeout=10,
    )
    assert "TRITONSERVER_RESPONSE_COMPLETE_FINAL" in error.message
    assert "'default_sender'" in error.message
    assert error.status == {"http": "500", "grpc": "StatusCode.INTERNAL"}[protocol]
