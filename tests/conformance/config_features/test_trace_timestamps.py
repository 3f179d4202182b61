"""Triton's request traces (--trace-config mode=triton, level=TIMESTAMPS) of requests to
python models (models/stats_*): the activities a trace holds for an answer, an error
response, an exception and a decoupled stream, and the order of the compute timestamps the
backend reports. Profiling tools (trace_summary.py) read these; they must be the original's.
The BLS child trace is conformance/bls/test_bls_trace.py."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from conformance_support.clients import bytes_input, infer, infer_error
from conformance_support.launcher import trace_args
from conformance_support.streaming import stream_once

MODELS = ["stats_plain", "stats_decoupled"]
# (model, MODE) in the order they are sent: one trace each.
CASES = [
    ("stats_plain", "ok"),
    ("stats_plain", "error"),
    ("stats_plain", "raise"),
    ("stats_decoupled", "ok"),
    ("stats_decoupled", "raise"),
]
COMPUTE = ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]
HTTP = ["HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"]
REQUEST = ["REQUEST_START", "QUEUE_START", "REQUEST_END"]


@pytest.fixture(scope="module")
def traces(feature_repository, tmp_path_factory):
    """The trace of each case, as {activity: ns}, read after the server wrote its file."""
    trace_file = tmp_path_factory.mktemp("trace") / "trace.json"
    args = trace_args(trace_file)
    start = feature_repository.start(
        model_control_mode="explicit", load_models=MODELS, extra_args=args
    )
    with start as server:
        for model, mode in CASES:
            if model == "stats_decoupled":
                stream_once(server, model, {"MODE": bytes_input(mode)})
            elif mode == "ok":
                infer(server, "http", model, {"MODE": bytes_input(mode)})
            else:
                infer_error(server, "http", model, {"MODE": bytes_input(mode)})
    # The server writes its traces when it exits; records of one trace share its id.
    models: dict[int, str] = {}
    stamps: dict[int, dict[str, int]] = defaultdict(dict)
    for record in json.loads(trace_file.read_text()):
        if "model_name" in record:
            models[record["id"]] = record["model_name"]
        for stamp in record.get("timestamps", []):
            stamps[record["id"]][stamp["name"]] = stamp["ns"]
    ids = sorted(models)
    assert [models[i] for i in ids] == [model for model, _ in CASES]
    return {case: stamps[i] for case, i in zip(CASES, ids)}


@pytest.mark.parametrize("mode", ["ok", "error", "raise"])
def test_a_request_has_every_activity(traces, mode):
    stamps = traces[("stats_plain", mode)]
    assert set(stamps) == set(HTTP + REQUEST + COMPUTE + ["INFER_RESPONSE_COMPLETE"])


@pytest.mark.parametrize("mode", ["ok", "raise"])
def test_a_decoupled_stream_has_every_activity(traces, mode):
    stamps = traces[("stats_decoupled", mode)]
    grpc = {"GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "GRPC_SEND_START", "GRPC_SEND_END"}
    assert set(stamps) == grpc | set(REQUEST + COMPUTE + ["INFER_RESPONSE_COMPLETE"])


@pytest.mark.parametrize("case", CASES, ids=[f"{m}-{c}" for m, c in CASES])
def test_compute_timestamps_are_in_order(traces, case):
    stamps = traces[case]
    times = [stamps[name] for name in ["QUEUE_START", *COMPUTE]]
    assert times == sorted(times)
    assert stamps["REQUEST_START"] <= stamps["QUEUE_START"] <= stamps["REQUEST_END"]
