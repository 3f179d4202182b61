"""Differential probe of decoupled corner cases (response sender, async execute, BLS
streams): the same cases run against both backends and must give the same responses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import bytes_input
from conformance_support.streaming import Stream, stream_once

MODELS = ["probe_sender", "probe_async", "probe_callee"]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


def events_of(server, model, mode):
    return stream_once(server, model, {"MODE": bytes_input(mode)}, timeout=20)


def summary(events):
    """Each event as (outputs as lists, final flag, error text)."""
    rows = []
    for e in events:
        outs = {k: v.tolist() for k, v in sorted(e.outputs.items())}
        rows.append((outs, e.final, e.error))
    return rows


def found(server, mode):
    (event,) = events_of(server, "probe_async", mode)
    assert event.final and event.error is None
    return json.loads(event.value("MSG"))


def test_noncontiguous_outputs(server):
    assert summary(events_of(server, "probe_sender", "noncontiguous")) == [
        ({"OUT": [0, 2, 4, 6, 8]}, False, None),
        ({"OUT": [5, 2, 4, 1, 3, 0]}, False, None),
        ({}, True, None),
    ]


def test_zero_size_outputs(server):
    assert summary(events_of(server, "probe_sender", "zero_size")) == [
        ({"OUT": []}, False, None),
        ({"BOUT": []}, True, None),
    ]


def test_bytes_with_nuls(server):
    assert summary(events_of(server, "probe_sender", "bytes_nul")) == [
        ({"BOUT": [b"a\x00b", b"\x00", b""]}, True, None),
    ]


def test_tensor_reused_in_two_responses(server):
    assert summary(events_of(server, "probe_sender", "tensor_reused")) == [
        ({"OUT": [7, 8]}, False, None),
        ({"OUT": [7, 8]}, True, None),
    ]


def test_array_mutated_after_send(server):
    # send() takes the values at the time of the call.
    assert summary(events_of(server, "probe_sender", "array_mutated")) == [
        ({"OUT": [1, 2, 3]}, False, None),
        ({"OUT": [101, 102, 103]}, False, None),
        ({}, True, None),
    ]


@pytest.mark.deviation(
    "original: sends from many threads at once corrupt responses (the client cannot decode "
    "them) and the request never ends"
)
def test_eight_threads_share_the_sender_then_final(server):
    events = events_of(server, "probe_sender", "threads")
    assert [e.error for e in events] == [None] * 41
    assert [e.final for e in events] == [False] * 40 + [True]
    got = [int(e.outputs["OUT"][0]) for e in events[:-1]]
    assert sorted(got) == sorted(k * 100 + i for k in range(8) for i in range(5))
    for k in range(8):
        assert [v for v in got if v // 100 == k] == [k * 100 + i for i in range(5)]


def test_outputs_and_final_in_one_send(server):
    assert summary(events_of(server, "probe_sender", "outputs_and_final")) == [
        ({"OUT": [1]}, True, None),
    ]


def test_send_after_the_client_cancelled(server):
    stream = Stream(server)
    try:
        stream.send("probe_sender", {"MODE": bytes_input("send_after_cancel")}, request_id="c")
        stream.quiet(0.3)
    finally:
        stream.close(cancel=True)
    (event,) = events_of(server, "probe_sender", "report_cancel")
    # send() after the cancellation neither raises nor reaches anyone.
    assert event.outputs["BOUT"].tolist() == [b"cancelled", b"sent", b"sent"]


def test_async_execute_returns_while_a_bls_stream_is_forwarded(server):
    assert summary(events_of(server, "probe_async", "forward_after_return")) == [
        ({"OUT": [0]}, False, None),
        ({"OUT": [1]}, False, None),
        ({"OUT": [2]}, False, None),
        ({}, True, None),
    ]


def test_bls_output_tensors_forwarded_as_they_are(server):
    events = events_of(server, "probe_async", "forward_tensors")
    assert summary(events[:3]) == [
        ({"OUT": [0]}, False, None),
        ({"OUT": [1]}, False, None),
        ({"OUT": [2]}, False, None),
    ]
    assert len(events) == 4 and events[3].final and events[3].error is None
    assert np.array_equal(events[3].outputs["OUT"], np.arange(100000, dtype=np.int32))


@pytest.mark.parametrize("mode", ["error_mid", "sync_error_mid"])
def test_bls_stream_drops_an_error_response_midway(server, mode):
    # The callee sends [0], an error response without FINAL, [1], then FINAL: the caller
    # gets both outputs in order and the empty final response, and never the error (the
    # original's BLS stream drops it; model code written for it may read every response's
    # outputs). A gRPC client of the same callee does get it (below).
    assert found(server, mode) == [
        {"error": None, "out": [0]},
        {"error": None, "out": [1]},
        {"error": None, "out": None},
    ]


@pytest.mark.deviation("ours says in the log that it dropped the callee's error response")
def test_a_dropped_error_response_is_logged(server):
    found(server, "error_mid")
    log = server.log_text()
    assert "a decoupled BLS call dropped an error response the callee sent" in log
    assert "callee failed midway" in log


@pytest.mark.deviation(
    "original: a decoupled callee that raises after a send never ends the BLS stream; the "
    "caller waits forever"
)
def test_bls_stream_of_a_callee_raising_midway(server):
    responses = found(server, "raise_mid")
    assert responses[0] == {"error": None, "out": [0]}
    assert len(responses) == 2 and responses[1]["out"] is None
    assert "callee raised midway" in responses[1]["error"]


def test_client_sees_an_error_response_midway(server):
    with Stream(server) as stream:
        stream.send("probe_callee", {"MODE": bytes_input("error_mid")}, request_id="e")
        events = stream.until_final(1, 20)
        events += stream.quiet(1.0)
    # A gRPC client gets the error between the outputs (the helper marks an error final),
    # on both backends; only the original's BLS stream loses it.
    assert summary(events) == [
        ({"OUT": [0]}, False, None),
        ({}, True, "callee failed midway"),
        ({"OUT": [1]}, False, None),
        ({}, True, None),
    ]


def test_async_exec_cancelled_by_asyncio(server):
    # The cancelled call raises CancelledError in the caller; later calls still work.
    assert found(server, "cancel_async_exec") == {
        "outcome": "cancelled",
        "after": [
            {"error": None, "out": [0]},
            {"error": None, "out": [1]},
            {"error": None, "out": [2]},
            {"error": None, "out": None},
        ],
    }


def test_bls_output_outlives_its_response(server):
    assert found(server, "output_kept") == {
        "sum": sum(range(100000)),
        "len": 100000,
        "again_len": 100000,
    }


def test_probe_models_still_answer(server):
    with Stream(server) as stream:
        stream.send("probe_sender", {"MODE": bytes_input("outputs_and_final")}, request_id="x")
        (event,) = stream.until_final(1, 20)
    assert event.error is None and np.array_equal(event.outputs["OUT"], [1])
