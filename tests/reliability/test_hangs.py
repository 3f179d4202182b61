"""An execute that never returns, or a stub stopped with SIGSTOP, fails its request after a
configurable timeout and the instance recovers on its own (UV-07): execute-timeout-seconds
bounds execute; without it a stopped stub is still given up after stub-timeout-seconds."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from reliability_support import LogWatch, infer, ok_stream, start, stream, stubs, wait_for
from tritonclient.utils import InferenceServerException

EXECUTE_TIMEOUT_S = 2
#: Slack on top of a configured timeout: the wait wakes at least once a second.
SLACK_S = 3.0


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start(
        ["chaos", "chaos_decoupled", "bls_waiter"],
        backend_config=[
            ("execute-timeout-seconds", str(EXECUTE_TIMEOUT_S)),
            ("stub-timeout-seconds", "5"),
            ("stub-restart-max-backoff-seconds", "1"),
        ],
    ) as s:
        yield s


def test_execute_that_never_returns_times_out(server: Any, http: Any) -> None:
    client = http(server)
    before = stubs(server, "chaos")
    watch = LogWatch(server)
    t0 = time.monotonic()
    with pytest.raises(InferenceServerException) as info:
        infer(client, "chaos", "hang")
    took = time.monotonic() - t0
    assert EXECUTE_TIMEOUT_S <= took < EXECUTE_TIMEOUT_S + SLACK_S
    message = str(info.value)
    assert f"execute took longer than execute-timeout-seconds={EXECUTE_TIMEOUT_S}" in message
    assert "model 'chaos', instance 'chaos_0_" in message
    assert "about to hang" in message  # the stub's stderr tail
    dead = watch.wait("a new stub is serving").split("instance '")[1].split("'")[0]
    assert stubs(server, "chaos")[dead] != before[dead]
    assert infer(client, "chaos", "ok") in stubs(server, "chaos").values()


def test_execute_timeout_while_a_blocking_bls_call_waits(server: Any, http: Any) -> None:
    """The caller waits for `chaos`, which hangs: the caller's execute times out like any
    other (its stub is replaced), the callee's own timeout follows, and the late answer of
    the callee to a caller that is gone harms nothing."""
    client = http(server)
    watch = LogWatch(server)
    with pytest.raises(InferenceServerException) as info:
        infer(client, "bls_waiter", "hang")
    message = str(info.value)
    assert f"execute took longer than execute-timeout-seconds={EXECUTE_TIMEOUT_S}" in message
    assert "model 'bls_waiter', instance 'bls_waiter_0_0'" in message
    watch.wait("instance 'bls_waiter_0_0': a new stub is serving")
    pid = wait_for("BLS through the new stub", lambda: _bls_pid(client), timeout=20)
    assert pid in stubs(server, "chaos").values()


def _bls_pid(client: Any) -> int:
    try:
        return infer(client, "bls_waiter", "ok")
    except InferenceServerException:
        return 0


def test_stopped_stub_times_out_and_is_replaced(server: Any) -> None:
    (pid,) = stubs(server, "chaos_decoupled").values()
    watch = LogWatch(server)
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    got, _ = stream(server, "ok", timeout=EXECUTE_TIMEOUT_S + SLACK_S + 5)
    took = time.monotonic() - t0
    (error,) = got
    assert EXECUTE_TIMEOUT_S <= took < EXECUTE_TIMEOUT_S + SLACK_S
    assert "execute took longer than execute-timeout-seconds" in str(error)
    assert "was killed by signal 9 (SIGKILL)" in str(error)
    watch.wait("instance 'chaos_decoupled_0_0': a new stub is serving")
    assert wait_for("the model to serve", lambda: ok_stream(server), timeout=20)


def test_stopped_stub_without_execute_timeout_is_given_up_after_stub_timeout() -> None:
    with start(["chaos_decoupled"], backend_config=[("stub-timeout-seconds", "2")]) as server:
        (pid,) = stubs(server, "chaos_decoupled").values()
        watch = LogWatch(server)
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        got, _ = stream(server, "ok", timeout=20)
        took = time.monotonic() - t0
        (error,) = got
        assert 2 <= took < 2 + SLACK_S
        assert (
            "it was stopped (SIGSTOP or SIGTSTP) for longer than stub-timeout-seconds=2 s"
            in str(error)
        )
        watch.wait("instance 'chaos_decoupled_0_0': a new stub is serving")
        assert wait_for("the model to serve", lambda: ok_stream(server), timeout=20)
