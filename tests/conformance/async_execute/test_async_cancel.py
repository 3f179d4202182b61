"""UV-31's optional setting: with PYBACKEND_ASYNC_EXECUTE_CANCEL the backend cancels an
`async def execute` whose client cancelled, so asyncio.CancelledError is raised inside it
(within 100 ms), in decoupled and default mode. The original has no such setting."""

from __future__ import annotations

import json
import time

import pytest
import tritonclient.grpc as grpcclient

from conformance_support.clients import bytes_input, infer, make_input, text_output
from conformance_support.streaming import Stream, stream_once

MODELS = ["async_cancel", "async_cancel_default"]
WITHIN_S = 0.1  # UV-31 (the backend polls every 20 ms)

pytestmark = pytest.mark.deviation("PYBACKEND_ASYNC_EXECUTE_CANCEL is pybackend's setting")


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=MODELS)
    with start as srv:
        yield srv


def report(server, model: str, key: str) -> dict | None:
    mode = {"MODE": bytes_input(f"report:{key}")}
    if model == "async_cancel":
        (event,) = stream_once(server, model, mode)
        return json.loads(event.value("MSG"))
    return json.loads(text_output(infer(server, "grpc", model, mode), "MSG"))


def wait_report(server, model: str, key: str) -> dict:
    deadline = time.monotonic() + 10
    while (record := report(server, model, key)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert record is not None, "the coroutine was never cancelled"
    return record


def test_decoupled_coroutine_is_cancelled_with_the_stream(server):
    stream = Stream(server)
    stream.send("async_cancel", {"MODE": bytes_input("wait:stream")})
    time.sleep(0.3)  # the coroutine is sleeping
    cancelled_at = time.time()
    stream.close(cancel=True)
    record = wait_report(server, "async_cancel", "stream")
    assert record["cancelled_at"] - cancelled_at < WITHIN_S


def test_default_mode_coroutine_is_cancelled_with_the_call(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        ctx = client.async_infer(
            "async_cancel_default",
            [make_input("grpc", "MODE", bytes_input("wait:call"))],
            callback=lambda result, error: None,
        )
        time.sleep(0.3)
        cancelled_at = time.time()
        ctx.cancel()
        # The instance is free again at once: the report is served by the same instance.
        record = wait_report(server, "async_cancel_default", "call")
    finally:
        client.close()
    assert record["cancelled_at"] - cancelled_at < WITHIN_S
