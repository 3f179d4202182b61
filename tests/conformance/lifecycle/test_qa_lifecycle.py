"""NVIDIA's qa L0_backend_python/lifecycle cases that no other module of ours covers
(docs/qa_coverage.md): errors for part of a dynamic batch, the failure metric of a model
that raises, an exception in finalize, the server's environment in the model, and gRPC
streams with and without the triton_grpc_error header."""

from __future__ import annotations

import concurrent.futures
import queue
import re
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conformance_support.clients import bytes_input, infer, infer_error, text_output
from conformance_support.control import load, unload, wait_for
from conformance_support.metrics_endpoint import key, samples, scrape
from conformance_support.streaming import Stream

MODELS = ["qa_batch_error", "qa_wrong_model", "qa_grpc_error", "qa_model_env"]


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit", load_models=MODELS, env={"MY_ENV": "MY_ENV"}
    )
    with start as srv:
        yield srv


def test_server_environment_reaches_the_model(server):
    """qa test_shared_memory.sh with model_env: MY_ENV, exported for the server, is in the
    model's environment in initialize and in execute."""
    result = infer(server, "grpc", "qa_model_env", {"NAME": bytes_input("MY_ENV")})
    assert text_output(result, "VALUE") == "MY_ENV|MY_ENV"


def test_errors_for_part_of_a_batch(server):
    """qa LifecycleTest.test_batch_error: one batch of three, the first and third requests
    fail, the second gets its answer."""
    arrays = [np.random.default_rng(i).standard_normal((2, 2)).astype(np.float32) for i in range(3)]
    with Stream(server) as stream:
        for i, array in enumerate(arrays):
            stream.send("qa_batch_error", {"IN": array}, request_id=f"r{i}")
        events = [stream.next() for _ in arrays]
    errors = [e for e in events if e.error is not None]
    answers = [e for e in events if e.error is None]
    assert len(errors) == 2, events
    assert all("of a batch of 3 fails" in e.error for e in errors)
    assert [a.request_id for a in answers] == ["r1"]
    np.testing.assert_array_equal(answers[0].outputs["OUT"], arrays[1])


def _backend_failures(server) -> float:
    found = samples(scrape(server), "nv_inference_request_failure")
    return found.get(
        key("nv_inference_request_failure", model="qa_wrong_model", reason="BACKEND", version="1"),
        0.0,
    )


def test_exception_in_execute_counts_as_a_backend_failure(server):
    """qa LifecycleTest.test_infer_pymodel_error: the message names the instance, and the
    request counts once under nv_inference_request_failure{reason="BACKEND"}."""
    before = _backend_failures(server)
    data = (16384 * np.random.default_rng(0).random((2, 2))).astype(np.uint32)
    error = infer_error(server, "http", "qa_wrong_model", {"IN": data})
    assert error.message.startswith(
        "Failed to process the request(s) for model 'qa_wrong_model_0_0', message: "
    ), error.message
    assert "NameError" in error.message
    # The server counts the failure once the response is out: give it a moment.
    wait_for(lambda: _backend_failures(server) > before, 10, "the BACKEND failure count")
    assert _backend_failures(server) == before + 1


def test_exception_in_finalize_is_logged_and_the_unload_completes(server):
    """qa lifecycle test.sh with fini_error: the NameError of finalize is in the log."""
    load(server, "qa_fini_error")
    unload(server, "qa_fini_error")
    wanted = re.compile(re.escape("name 'undefined_variable' is not defined"))
    wait_for(lambda: wanted.search(server.log_text()), 30, "the finalize error in the log")


def _collect(replies: queue.Queue, result, error) -> None:
    replies.put(error if error is not None else result)


def _client(server) -> grpcclient.InferenceServerClient:
    """A client with a connection of its own. By default gRPC shares one connection among
    the channels of a process to the same address, and a triton_grpc_error stream that
    ends with an error can take that connection down with it (seen with both backends: a
    fresh stream of the next test reported "Stream removed (Socket closed)" before any
    request); as separate qa client processes do, each test gets its own."""
    return grpcclient.InferenceServerClient(
        server.grpc_url, channel_args=[("grpc.use_local_subchannel_pool", 1)]
    )


def _grpc_stream_answers(server, values, headers=None):
    """Send one request per value on one gRPC stream; whatever the stream reports."""
    seen: queue.Queue = queue.Queue()
    client = _client(server)
    client.start_stream(callback=partial(_collect, seen), headers=headers)
    replies = []
    try:
        for value in values:
            tensor = grpcclient.InferInput("IN", [2, 2], "FP32")
            tensor.set_data_from_numpy(np.full((2, 2), value, np.float32))
            try:
                client.async_stream_infer("qa_grpc_error", [tensor])
            except InferenceServerException as exc:
                replies.append(exc)
                break
            replies.append(seen.get(timeout=30))
    finally:
        client.stop_stream()
        client.close()
    return replies


def test_stream_survives_error_responses_without_triton_grpc_error(server):
    """qa LifecycleTest.test_triton_grpc_error_error_off: every request is answered."""
    replies = _grpc_stream_answers(server, [1.0, -1.0, 1.0, -1.0])
    kinds = [isinstance(r, InferenceServerException) for r in replies]
    assert kinds == [False, True, False, True]


def test_triton_grpc_error_ends_the_stream_with_the_status(server):
    """qa LifecycleTest.test_triton_grpc_error_error_on: with the header the error arrives as
    the stream's gRPC status (INTERNAL) and the stream is closed after it."""
    replies = _grpc_stream_answers(server, [1.0, -1.0, 1.0], {"triton_grpc_error": "true"})
    assert not isinstance(replies[0], InferenceServerException)
    assert isinstance(replies[1], InferenceServerException)
    assert str(replies[1].status()) == "StatusCode.INTERNAL"
    assert len(replies) == 2 or isinstance(replies[2], InferenceServerException)


def test_triton_grpc_error_on_two_streams_at_once(server):
    """qa LifecycleTest.test_triton_grpc_error_multithreaded: each stream ends on its own."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [
            pool.submit(_grpc_stream_answers, server, [1.0, -1.0], {"triton_grpc_error": "true"})
            for _ in range(2)
        ]
        for run in runs:
            replies = run.result()
            assert [isinstance(r, InferenceServerException) for r in replies] == [False, True]


def test_triton_grpc_error_stream_cancelled_after_an_answer(server):
    """qa LifecycleTest.test_triton_grpc_error_cancel: cancelling such a stream is quiet."""
    seen: queue.Queue = queue.Queue()
    client = _client(server)
    try:
        client.start_stream(callback=partial(_collect, seen), headers={"triton_grpc_error": "true"})
        tensor = grpcclient.InferInput("IN", [2, 2], "FP32")
        tensor.set_data_from_numpy(np.ones((2, 2), np.float32))
        client.async_stream_infer("qa_grpc_error", [tensor])
        first = seen.get(timeout=30)
        assert not isinstance(first, InferenceServerException), first
        client.stop_stream(cancel_requests=True)
    finally:
        client.close()
