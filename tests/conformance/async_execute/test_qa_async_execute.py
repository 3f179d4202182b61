"""NVIDIA's qa `L0_backend_python/async_execute` pattern (issue #19 item 3), through a real
server: a decoupled `async def execute` is scheduled in the background, so requests sent
together run at once on ONE instance, also when a BLS model fans out to it with
`await async_exec(decoupled=True)`.

Concurrency is counted, not timed: the model reports in OVERLAP how many of its sleeps ran
at once while each execute ran (one at a time that is 1 whatever the machine's load). Each
sleep is long enough (SLEEP_S) for four requests sent back to back to reach the instance
before the first one ends, even on a loaded 2-core machine."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.control import wait_for
from conformance_support.streaming import Event, Stream

MODEL = "qa_async_decouple"
BLS_MODEL = "qa_async_decouple_bls"
SLEEP_S = 2.0
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=[MODEL, BLS_MODEL])
    with start as srv:
        yield srv


def wait_seconds(batch_size: int, seconds: float) -> dict[str, np.ndarray]:
    return {"WAIT_SECONDS": np.full((batch_size, 1), seconds, dtype=np.float32)}


def answers(events: list[Event]) -> list[Event]:
    """The responses that carry outputs (the stream also reports empty FINAL flags)."""
    assert all(e.error is None for e in events), [e.error for e in events]
    return [e for e in events if e.outputs]


def send_together(server, model: str, batch_size: int, requests: int) -> list[Event]:
    with Stream(server) as stream:
        for i in range(requests):
            stream.send(model, wait_seconds(batch_size, SLEEP_S), request_id=f"r{i}")
        return answers(stream.until_final(requests, TIMEOUT_S))


@pytest.mark.parametrize("model", [MODEL, BLS_MODEL])
@pytest.mark.parametrize("batch_size,requests", [(4, 1), (1, 4)], ids=["batched", "four"])
def test_requests_sent_together_run_at_once(server, model, batch_size, requests):
    """qa test_concurrent_execute_{single,multi}_request[_bls]: every request is answered,
    with DUMMY_OUT of its batch size, and all four sleeps ran at once."""
    got = send_together(server, model, batch_size, requests)
    assert len(got) == requests
    for event in got:
        assert event.outputs["DUMMY_OUT"].shape == (batch_size, 1)
    assert max(int(e.outputs["OVERLAP"].max()) for e in got) == 4, [
        e.outputs["OVERLAP"].ravel().tolist() for e in got
    ]


def test_a_shorter_request_sent_later_is_answered_first(server):
    """qa test_concurrent_execute_different_duration: a long request, then a short one on the
    same stream; the short one's response comes first (one at a time, the long one would)."""
    with Stream(server) as stream:
        stream.send(MODEL, wait_seconds(1, 3 * SLEEP_S), request_id="long")
        stream.send(MODEL, wait_seconds(2, 0.1), request_id="short")
        got = answers(stream.until_final(2, TIMEOUT_S))
    assert [e.request_id for e in got] == ["short", "long"]
    assert [e.outputs["DUMMY_OUT"].shape[0] for e in got] == [2, 1]


def test_an_exception_in_the_background_is_logged(server):
    """qa test_model_raise_exception: the request is closed by the model, the ValueError
    raised after that only reaches the server log."""
    text = "ValueError: wait_secs cannot be negative"
    assert text not in server.log_text()
    with Stream(server) as stream:
        stream.send(MODEL, wait_seconds(1, -1), request_id="bad")
        (event,) = stream.until_final(1, TIMEOUT_S)
    assert event.error is None and not event.outputs
    wait_for(lambda: text in server.log_text(), 10.0, f"log line {text!r}")
