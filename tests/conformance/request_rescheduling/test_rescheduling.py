"""Request rescheduling for iterative sequences (spec 4.5): set_release_flags(RESCHEDULE)
sends the same request back to execute, in decoupled mode (one response per iteration)
and in default mode (None while rescheduled, the response at the end). With
``iterative_sequence: true`` the client sends no sequence id or flags: the core makes each
request a sequence of its own (a rescheduled request comes back with no START/END)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error
from conformance_support.streaming import Stream

MODELS = ["iterative_decoupled", "iterative_default", "iterative_caller"]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


def inputs(mode: str, steps: int) -> dict[str, np.ndarray]:
    return {"MODE": bytes_input(mode), "STEPS": np.array([steps], np.int32)}


def test_decoupled_request_is_rescheduled_until_done(server):
    with Stream(server) as stream:
        stream.send("iterative_decoupled", inputs("ok", 5), "it")
        events = stream.until_final(1)
    assert [e.error for e in events] == [None] * 5
    assert [e.value() for e in events] == [0, 1, 2, 3, 4]
    assert [e.final for e in events] == [False] * 4 + [True]
    assert {e.request_id for e in events} == {"it"}


def test_several_iterative_sequences_interleave(server):
    with Stream(server) as stream:
        for seq in (21, 22, 23):
            stream.send(
                "iterative_decoupled",
                inputs("ok", 4),
                f"s{seq}",
            )
        events = stream.until_final(3)
    for seq in (21, 22, 23):
        mine = [e for e in events if e.request_id == f"s{seq}"]
        assert [e.value() for e in mine] == [0, 1, 2, 3]
        assert mine[-1].final


def test_decoupled_error_while_rescheduled_ends_the_request(server):
    """A failing batch releases its requests with RELEASE_ALL, never RESCHEDULE."""
    with Stream(server) as stream:
        stream.send("iterative_decoupled", inputs("raise", 5), "r")
        events = stream.until_final(1)
        assert stream.quiet(0.5) == []
    assert [e.value() for e in events[:-1]] == [0]
    assert "boom in the second iteration" in events[-1].error


def test_final_sent_before_rescheduling_ends_the_request(server):
    """NVIDIA's qa request_rescheduling_cases, case 0: a response and FINAL, then
    RESCHEDULE; the request comes back once more and sends nothing."""
    with Stream(server) as stream:
        stream.send("iterative_decoupled", inputs("final_first", 1), "ff")
        events = stream.until_final(1)
        assert stream.quiet(0.5) == []
    assert [e.error for e in events] == [None, None]
    assert [e.value() for e in events[:1]] == [0]
    assert [e.final for e in events] == [False, True]


def test_a_thread_answers_a_rescheduled_request(server):
    """NVIDIA's qa request_rescheduling_cases, case 1: RESCHEDULE, and a thread sends the
    responses and FINAL while the request comes back and sends nothing."""
    with Stream(server) as stream:
        stream.send("iterative_decoupled", inputs("thread", 3), "th")
        events = stream.until_final(1)
        assert stream.quiet(0.5) == []
    assert [e.error for e in events] == [None] * 4
    assert [e.value() for e in events[:3]] == [2, 1, 0]
    assert [e.final for e in events] == [False] * 3 + [True]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_default_mode_request_is_rescheduled_until_done(server, protocol):
    result = infer(server, protocol, "iterative_default", inputs("ok", 4))
    assert result.outputs["OUT"].tolist() == [4]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_default_mode_response_for_a_rescheduled_request_fails(server, protocol):
    error = infer_error(
        server,
        protocol,
        "iterative_default",
        inputs("respond_while_rescheduled", 3),
    )
    # The class's module differs (c_python_backend_utils in the original): compare around it.
    head, _, tail = error.message.partition("found type '<class '")
    assert head == (
        "Failed to process the request(s) for model 'iterative_default_0_0', message: "
        "Expected a None object in the execute function return list for reschduled request, "
    )
    assert tail.endswith("InferenceResponse'>'."), error.message


def bls_events(server, mode: str, steps: int, request_id: str) -> list:
    result = infer(
        server,
        "grpc",
        "iterative_caller",
        inputs(mode, steps),
        client_timeout=30,
        request_id=request_id,
    )
    return json.loads(result.outputs["EVENTS"][0])


@pytest.mark.parametrize(
    ("mode", "steps", "expected"),
    [
        ("ok", 3, [0, 1, 2]),
        # A response without outputs is the stream's FINAL flag, as the caller sees it.
        ("final_first", 1, [0, "final"]),
        ("thread", 3, [2, 1, 0, "final"]),
    ],
)
def test_a_bls_stream_of_a_rescheduled_request(server, mode, steps, expected):
    """exec(decoupled=True) into a model that reschedules its request sees what a client's
    stream sees, and the request ends (NVIDIA's qa bls_request_rescheduling)."""
    assert bls_events(server, mode, steps, f"bls-{mode}") == expected


@pytest.mark.deviation(
    "the original never ends the BLS stream when a rescheduled execution raises: the "
    "calling request waits until its client gives up"
)
def test_a_bls_stream_ends_with_the_error_of_a_rescheduled_execution(server):
    events = bls_events(server, "raise", 3, "bls-raise")
    assert events[0] == 0
    assert "boom in the second iteration" in events[1]["error"]
    assert len(events) == 2
    # The caller's instance is free again: the next call is served.
    assert bls_events(server, "ok", 2, "bls-after") == [0, 1]
