"""BLS to a decoupled model with exec(decoupled=True): a ResponseIterator that yields the
responses as they stream, ends after the final one, replays when iterated again and can
cancel the call (spec 3.2 ResponseIterator, 4.6)."""

from __future__ import annotations

import pytest
from bls_support import CALLEES, CALLERS, NOT_READY, run, stream


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=CALLEES + CALLERS)
    with start as srv:
        yield srv


def test_stream_yields_each_response_then_an_empty_final_one(server):
    responses = run(server, "stream", [3])["responses"]
    assert [r["outputs"] for r in responses] == [{"OUT": [0]}, {"OUT": [1]}, {"OUT": [2]}, {}]


def test_stream_of_no_responses(server):
    responses = run(server, "stream", [0])["responses"]
    assert [r["outputs"] for r in responses] == [{}]


def test_iterating_again_replays_the_responses(server):
    result = run(server, "stream_replay")
    assert result["first"] == [{"OUT": [0]}, {"OUT": [1]}, {}]
    assert result["second"] == result["first"]


def test_response_iterator_protocol_of_qa_test_response_iterator(server):
    # A for-loop after a break goes on where the break left it; only an iterator that was
    # read to its end starts again from the first response.
    assert run(server, "iterator_protocol") == {
        "next": [0],
        "rest": [1, 2, 3, None],
        "after_rest": "stop",
        "replays": [[0, 1, 2, 3, None]] * 3,
        "before_break": [0, 1],
        "next_after_break": [2],
        "loop_after_break": [3, None],
        "after_loop": "stop",
        "dropped_first": [0],
    }


def test_error_of_a_decoupled_call_is_a_response(server):
    responses = run(server, "sync_to_decoupled_stream_error")["responses"]
    assert [r["error"] for r in responses] == [NOT_READY]


@pytest.mark.deviation("ResponseIterator.cancel() is newer than the original 24.10 here")
def test_cancel_stops_the_stream(server):
    seen = run(server, "stream_cancel")["seen"]
    # Two responses, then the callee notices the cancellation: it reports how far it got
    # (a negative number) and ends with the empty final response.
    assert seen[:2] == [0, 1]
    assert seen[-1] is None
    assert len(seen) < 10
    assert seen[-2] < 0


def test_bls_from_a_thread_after_execute_returned(server):
    # A decoupled caller makes its BLS calls from a background thread and streams the results.
    assert stream(server, "bls_decoupled_caller", [2.0, 5.0]) == [
        {"OUTPUT1": [4.0, 10.0]},
        {"streamed": [[0]]},
        {"streamed": [[1]]},
        {"streamed": []},
    ]


@pytest.mark.deviation("the original blocks until the stream ends when an iterator is dropped")
def test_dropping_an_unfinished_iterator_does_not_block(server):
    result = run(server, "drop_unfinished_iterator")
    assert result["first"] == {"OUT": [0]}
    assert result["dropped_in_s"] < 0.5  # blocking would take the 4 x 200 ms still to go
    assert result["pending"] == 0
