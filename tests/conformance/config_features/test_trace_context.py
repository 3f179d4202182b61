"""``request.trace().get_context()`` (models/trace_context*): with tritonserver tracing in
OpenTelemetry mode (``--trace-config mode=opentelemetry``) the model gets its request's
context as the server made it, ``{"traceparent":"00-<trace id>-<span id>-01"}``, within the
client's trace when the request carried a ``traceparent`` header, and a BLS request made
with ``trace=request.trace()`` is a span of the same trace (server#8837: model code links
its own spans to the server's). In Triton's own trace mode, and without tracing, None.
Observed on the original from the wheel; the collector address is a closed port (the spans
are lost, the contexts are not)."""

from __future__ import annotations

import json
import re

import pytest

from conformance_support.clients import bytes_input, infer, text_output
from conformance_support.launcher import trace_args

MODELS = ["trace_context", "trace_context_leaf"]
OPENTELEMETRY = [
    "--trace-config=mode=opentelemetry",
    "--trace-config=rate=1",
    "--trace-config=level=TIMESTAMPS",
    "--trace-config=opentelemetry,url=127.0.0.1:9/v1/traces",
]
CLIENT_TRACE, CLIENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TRACEPARENT = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}
CONTEXT = re.compile(r'\{"traceparent":"00-([0-9a-f]{32})-([0-9a-f]{16})-01"\}')


def _contexts(server, protocol: str, mode: str, headers=None) -> dict:
    inputs = {"MODE": bytes_input(mode)}
    # A copy: tritonclient's HTTP client adds its own (int) entries to the dict it gets.
    headers = dict(headers) if headers else None
    result = infer(server, protocol, "trace_context", inputs, headers=headers)
    return json.loads(text_output(result, "CTX"))


def _ids(context) -> tuple:
    """(trace id, span id) of a context the model got."""
    assert isinstance(context, str), context
    match = CONTEXT.fullmatch(context)
    assert match is not None, context
    return match.group(1), match.group(2)


@pytest.fixture(scope="module")
def opentelemetry(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit", load_models=MODELS, extra_args=OPENTELEMETRY
    )
    with start as server:
        yield server


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_traced_request_gives_the_model_its_opentelemetry_context(opentelemetry, protocol):
    first, second = (_ids(_contexts(opentelemetry, protocol, "own")["own"]) for _ in range(2))
    assert first[0] != second[0]  # a trace of its own per request


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_context_is_within_the_clients_trace(opentelemetry, protocol):
    trace, span = _ids(_contexts(opentelemetry, protocol, "own", TRACEPARENT)["own"])
    assert trace == CLIENT_TRACE and span != CLIENT_SPAN  # the server's span, in it


@pytest.mark.parametrize("headers", [None, TRACEPARENT], ids=["own-trace", "client-trace"])
def test_a_bls_request_with_the_trace_is_a_span_of_the_same_trace(opentelemetry, headers):
    seen = _contexts(opentelemetry, "http", "bls", headers)
    (trace, span), (leaf_trace, leaf_span) = _ids(seen["own"]), _ids(seen["leaf"])
    assert leaf_trace == trace and leaf_span != span
    if headers is not None:
        assert trace == CLIENT_TRACE


@pytest.mark.parametrize("tracing", ["triton", "off"])
def test_without_opentelemetry_there_is_no_context(feature_repository, tmp_path, tracing):
    args = trace_args(tmp_path / "trace.json") if tracing == "triton" else []
    start = feature_repository.start(
        model_control_mode="explicit", load_models=MODELS, extra_args=args
    )
    with start as server:
        for headers in (None, TRACEPARENT):
            assert _contexts(server, "http", "bls", headers) == {"own": None, "leaf": None}
