"""NVIDIA's qa L0_backend_python/decoupled, case by case (docs/qa_coverage.md): errors of
single requests of a decoupled model, execute that raises, a send after FINAL, and BLS
from decoupled models (threads, a thread's own event loop, a relayed decoupled stream).

The client reads a gRPC stream the way the qa test does (no empty final responses)."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conformance_support.streaming import stream_once

MODELS = [
    "qa_execute_error",
    "qa_raise",
    "qa_send_after_close",
    "qa_identity",
    "qa_add_sub",
    "qa_bls",
    "qa_square",
    "qa_bls_stream",
]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


def stream(server, model, requests):
    """Send ``requests`` ({input name: array}, request id) on one stream; every message
    until the server ends the stream, as (result, error, request id)."""
    messages = []

    def on_message(result, error):
        rid = result.get_response().id if result is not None else None
        messages.append((result, error, rid))

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        # stream_timeout bounds the wait should a request never end.
        client.start_stream(on_message, 20)
        for inputs, request_id in requests:
            infer_inputs = []
            for name, array in inputs.items():
                item = grpcclient.InferInput(name, list(array.shape), _datatype(array))
                item.set_data_from_numpy(array)
                infer_inputs.append(item)
            client.async_stream_infer(model, infer_inputs, request_id=request_id)
        client.stop_stream()  # returns once every request has ended
        ready = client.is_model_ready(model)
    finally:
        client.close()
    return messages, ready


def _datatype(array):
    return {np.dtype(np.float32): "FP32", np.dtype(np.int32): "INT32"}[array.dtype]


def test_decoupled_execute_error(server):
    # An error response for one request of a batch leaves the other request alone.
    first = np.random.randn(2, 2).astype(np.float32)
    second = np.random.randn(2, 2).astype(np.float32)
    messages, _ = stream(server, "qa_execute_error", [({"IN": first}, "0"), ({"IN": second}, "1")])
    errors = [error for _, error, _ in messages if error is not None]
    results = [result for result, error, _ in messages if error is None]
    assert len(errors) == 1 and len(results) == 1, messages
    assert isinstance(errors[0], InferenceServerException)
    assert errors[0].message() == "An error occurred during execution"
    assert np.array_equal(results[0].as_numpy("OUT"), second)


def test_decoupled_raise_exception(server):
    # Every request of a raising execute gets the error; the model stays ready.
    requests = [({"IN": np.random.randn(2, 2).astype(np.float32)}, str(i)) for i in range(10)]
    messages, ready = stream(server, "qa_raise", requests)
    assert len(messages) == 10
    for result, error, _ in messages:
        assert result is None and "Intentional Error" in error.message(), error
    assert ready


def test_decoupled_send_after_close_error(server):
    # The error of the send after FINAL has no request to go to: the client gets nothing.
    data = {"INPUT0": np.random.random(16).astype(np.float32)}
    data["INPUT1"] = np.random.random(16).astype(np.float32)
    messages, ready = stream(server, "qa_send_after_close", [(data, "0")])
    assert messages == []
    assert ready


def test_decoupled_send_after_close_error_with_empty_final(server):
    # With empty final responses asked for, the client sees the FINAL and nothing else.
    data = {"INPUT0": np.zeros(16, np.float32), "INPUT1": np.ones(16, np.float32)}
    events = stream_once(server, "qa_send_after_close", data, timeout=10)
    assert len(events) == 1 and events[0].final and events[0].outputs == {}
    assert events[0].error is None


def test_decoupled_bls(server):
    # BLS (exec and async_exec) in an async decoupled execute, then a response from a
    # thread's BLS and a final one from a thread running its own event loop. The first
    # also checks a DLPack BLS on the CPU (the qa model's GPU check without a GPU).
    data = np.random.randn(1, 2).astype(np.float32)
    messages, ready = stream(server, "qa_bls", [({"IN": data}, "0")])
    assert [error for _, error, _ in messages] == [None, None], messages
    for result, _, _ in messages:
        assert np.array_equal(result.as_numpy("OUT"), data)
    assert ready


def test_decoupled_bls_stream(server):
    # Each request relays a decoupled BLS stream of IN responses; 0 means no response.
    values = [4, 2, 0, 1]
    requests = [({"IN": np.array([v], np.int32)}, str(i)) for i, v in enumerate(values)]
    messages, _ = stream(server, "qa_bls_stream", requests)
    assert all(error is None for _, error, _ in messages), messages
    by_id = {}
    for result, _, rid in messages:
        by_id.setdefault(rid, []).append(result.as_numpy("OUT").tolist())
    assert by_id == {str(i): [[v]] * v for i, v in enumerate(values) if v}
