"""Decoupled mode (spec 4.4, UV-30, UV-10): the response sender through a real server and
gRPC streaming clients: every response in order, FINAL rules, sends from threads and
asyncio tasks after execute returned, errors, and a dropped sender."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer_error
from conformance_support.control import wait_for
from conformance_support.streaming import Stream, stream_once

MODELS = ["stream", "async_stream"]
PREFIX = "Failed to process the request(s) for model 'stream_0_0', message: "


@pytest.fixture(scope="module")
def server(feature_repository):
    # The quirks pinned below leave requests that never complete: a short exit timeout.
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


def inputs(mode: str, count: int = 0) -> dict[str, np.ndarray]:
    return {"MODE": bytes_input(mode), "COUNT": np.array([count], np.int32)}


def values(events):
    return [e.value() for e in events if "OUT" in e.outputs]


def report(server, key: str) -> str:
    (event,) = stream_once(server, "stream", inputs(f"report:{key}"))
    return event.value("MSG")


@pytest.mark.parametrize("mode", ["inline", "thread", "threads_interleaved"])
def test_every_response_then_an_empty_final(server, mode):
    events = stream_once(server, "stream", inputs(mode, 5))
    assert [e.error for e in events] == [None] * 6
    if mode == "threads_interleaved":
        # Two threads share the sender: each one's responses keep their order.
        got = values(events)
        assert sorted(got) == [0, 1, 2, 3, 4]
        assert [v for v in got if v % 2 == 0] == [0, 2, 4]
    else:
        assert values(events) == [0, 1, 2, 3, 4]
    assert [e.final for e in events] == [False] * 5 + [True]
    assert events[-1].outputs == {}


def test_final_flag_on_the_last_response(server):
    events = stream_once(server, "stream", inputs("final_with_last", 3))
    assert values(events) == [0, 1, 2]
    assert [e.final for e in events] == [False, False, True]


def test_final_only_means_zero_responses(server):
    events = stream_once(server, "stream", inputs("final_only"))
    assert len(events) == 1 and events[0].final and events[0].outputs == {}
    assert events[0].error is None


def test_many_requests_on_one_stream_keep_their_order(server):
    with Stream(server) as stream:
        for i in range(6):
            stream.send("stream", inputs("thread" if i % 2 else "inline", 4), request_id=f"q{i}")
        events = stream.until_final(6)
    assert all(e.error is None for e in events)
    by_request = {}
    for e in events:
        by_request.setdefault(e.request_id, []).append(e)
    assert sorted(by_request) == [f"q{i}" for i in range(6)]
    for evs in by_request.values():
        assert values(evs) == [0, 1, 2, 3] and [e.final for e in evs] == [False] * 4 + [True]


@pytest.mark.parametrize("mode", ["coroutine", "task"])
def test_async_execute_sends_from_the_coroutine_and_from_tasks(server, mode):
    events = stream_once(server, "async_stream", inputs(mode, 4))
    assert values(events) == [0, 1, 2, 3]
    assert events[-1].final


def test_async_tasks_of_many_requests_interleave(server):
    with Stream(server) as stream:
        for i in range(4):
            # 20 responses 5 ms apart: each task runs ~100 ms, long enough to overlap.
            stream.send("async_stream", inputs("task", 20), request_id=f"a{i}")
        events = stream.until_final(4, timeout=30)
    assert all(e.error is None for e in events)
    order = [e.request_id for e in events if not e.final]
    # Background tasks of the four requests run at once: their responses interleave.
    assert order != sorted(order)
    for rid in {f"a{i}" for i in range(4)}:
        assert values([e for e in events if e.request_id == rid]) == list(range(20))


def test_async_execute_raising_leaves_a_task_its_sender(server):
    """The coroutine hands its sender to a task and raises: the exception is only logged,
    and the task's responses and FINAL reach the client, as on the original."""
    events = stream_once(server, "async_stream", inputs("task_then_raise", 2), timeout=10)
    assert values(events) == [0, 1]
    assert [e.error for e in events] == [None] * 3
    assert [e.final for e in events] == [False, False, True]
    logged = "ValueError: boom after starting a task"
    wait_for(lambda: logged in server.log_text(), 10, "the coroutine's error in the server log")


@pytest.mark.deviation(
    "original: a decoupled coroutine that raises only logs the error; a sender it dropped "
    "without FINAL leaves its request open forever"
)
def test_async_execute_raising_drops_its_used_sender_with_the_traceback(server):
    """The coroutine sends once and raises, dropping its sender: the sender stays open
    after the raise (a task might hold it), and once it is collected the client gets the
    coroutine's traceback text, not the generic dropped-sender text."""
    events = stream_once(server, "async_stream", inputs("raise"), timeout=10)
    assert values(events) == [0]
    assert events[-1].error.startswith(
        "Failed to process the request(s) for model 'async_stream_0_0', message: "
        "ValueError: boom in async execute"
    ), events[-1].error


@pytest.mark.deviation(
    "pins the original's hang that ours fixes: nothing after the sent response",
    backend="original",
)
def test_original_leaves_a_raising_coroutine_hanging(server):
    with Stream(server) as stream:
        stream.send("async_stream", inputs("raise"), request_id="r")
        assert stream.next(10).value() == 0
        assert stream.quiet(1.5) == []
        stream.close(cancel=True)


def test_send_after_final_raises(server):
    events = stream_once(server, "stream", inputs("send_after_final"))
    assert values(events) == [0] and events[-1].final
    closed = "Unable to send response. Response sender has been closed."
    assert report(server, "after_final_response") == f"TritonModelException:{closed}"
    assert report(server, "after_final_flag") == f"TritonModelException:{closed}"


def test_bad_send_arguments_raise(server):
    events = stream_once(server, "stream", inputs("bad_flags"))
    assert values(events) == [0]
    assert report(server, "bad_flag") == (
        "TritonModelException:Unable to send response. Unsupported flag provided."
    )
    assert report(server, "no_response") == (
        "TritonModelException:Inference Response object must be provided when the response "
        "flags is set to zero."
    )


def test_error_response_ends_the_request(server):
    events = stream_once(server, "stream", inputs("error_response"))
    assert values(events) == [0]
    # (gRPC stream errors carry only the message: tritonclient reports no status for them.)
    assert events[-1].error == "bad token"


def test_execute_returning_a_value_fails(server):
    events = stream_once(server, "stream", inputs("return_value"))
    assert events[-1].error == (
        PREFIX + "Python model 'stream_0_0' is using the decoupled mode and the execute "
        "function must return None."
    )


def test_execute_raising_after_a_send(server):
    events = stream_once(server, "stream", inputs("raise_after_send"))
    assert values(events) == [0]
    assert events[-1].error.startswith(PREFIX + "ValueError: boom after one response")


def test_non_streaming_http_is_refused(server):
    error = infer_error(server, "http", "stream", inputs("inline", 1))
    assert "decoupled" in error.message


@pytest.mark.deviation(
    "original: a sender dropped without FINAL (and a decoupled request never answered) "
    "leaves the client waiting forever; ours ends the request with an error (UV-10)"
)
@pytest.mark.parametrize("mode", ["drop_in_thread", "never_send"])
def test_dropped_sender_ends_the_request_with_an_error(server, mode):
    events = stream_once(server, "stream", inputs(mode), timeout=10)
    assert values(events) == ([0] if mode == "drop_in_thread" else [])
    error = events[-1].error
    assert error is not None and "TRITONSERVER_RESPONSE_COMPLETE_FINAL" in error, error
    assert "'stream'" in error and "stream_0_0" in error


def test_dropped_sender_is_freed(server):
    with Stream(server) as stream:
        stream.send("stream", inputs("drop_in_thread"), request_id="d")
        first = stream.next(10)
        assert first.value() == 0
        # The original never ends this request: only check what the model sees.
        assert report(server, "x") == "<none>"
        (event,) = stream_once(server, "stream", inputs("freed"))
        assert event.value("MSG") == "freed"
        stream.close(cancel=True)


@pytest.mark.deviation(
    "pins the original's hang that ours fixes: the stream gets nothing after the sent response",
    backend="original",
)
def test_original_leaves_a_dropped_sender_hanging(server):
    with Stream(server) as stream:
        stream.send("stream", inputs("drop_in_thread"), request_id="d")
        assert stream.next(10).value() == 0
        assert stream.quiet(1.5) == []
        stream.close(cancel=True)
