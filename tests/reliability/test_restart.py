"""NVIDIA's qa `L0_backend_python/restart` (issue #19 item 6): after `kill -9` of an idle
stub the first request fails, reporting the death, and the next one is served: requests that
arrive while the new stub starts wait for it (at most stub-timeout-seconds) instead of
failing at once, as the original's restart (up to 24.05) did."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from reliability_support import LogWatch, start, stubs, wait_for
from tritonclient.utils import InferenceServerException

MODEL = "restart"
SERVING = "instance 'restart_0_0': a new stub is serving"


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start([MODEL]) as s:
        yield s


def identity(client: Any) -> int:
    """The qa client's request: a [1, 16] FP32 tensor comes back unchanged. Returns the
    stub's free shared memory as the model saw it."""
    data = np.random.randn(1, 16).astype(np.float32)
    inp = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
    inp.set_data_from_numpy(data)
    result = client.infer(MODEL, [inp])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
    return int(result.as_numpy("FREE")[0, 0])


def kill_stub(server: Any) -> tuple[int, LogWatch]:
    (pid,) = stubs(server, MODEL).values()
    watch = LogWatch(server)
    os.kill(pid, signal.SIGKILL)
    wait_for("the death to be noticed", lambda: "was killed by signal 9" in watch.text())
    return pid, watch


def first_fails_reporting(client: Any) -> None:
    with pytest.raises(InferenceServerException) as failed:
        identity(client)
    message = str(failed.value)
    assert "Stub process 'restart_0_0' is not healthy" in message
    assert "was killed by signal 9 (SIGKILL)" in message
    assert "died while no request was running" in message


def test_first_request_fails_and_the_next_is_served(server: Any, http: Any) -> None:
    """The qa test (its client starts after the kill, inside the restart's backoff)."""
    client = http(server)
    free = identity(client)
    pid, _ = kill_stub(server)
    first_fails_reporting(client)
    # The qa model's check: the new stub starts with the free shared memory the old one had.
    assert identity(client) == free > 0
    (new_pid,) = stubs(server, MODEL).values()
    assert new_pid != pid


def failures(client: Any) -> int:
    stats = client.get_inference_statistics(MODEL)["model_stats"][0]["inference_stats"]
    return int(stats["fail"]["count"])


def test_the_request_that_reports_the_death_counts_as_failed(server: Any, http: Any) -> None:
    """The model's statistics (and nv_inference_request_failure) count it, as the original
    counts every request its execute fails: before, requests failed without a batch (the
    death report) were missing from them."""
    client = http(server)
    identity(client)
    before = failures(client)
    kill_stub(server)
    first_fails_reporting(client)
    assert failures(client) == before + 1
    identity(client)
    assert failures(client) == before + 1


def test_once_the_new_stub_serves_nothing_is_reported(server: Any, http: Any) -> None:
    """Nobody met the dead stub: the report is dropped, a later request is served."""
    client = http(server)
    identity(client)
    _, watch = kill_stub(server)
    watch.wait(SERVING)
    identity(client)


def test_requests_during_the_restart_wait_for_the_new_stub(server: Any, http: Any) -> None:
    client = http(server)
    identity(client)
    _, watch = kill_stub(server)
    first_fails_reporting(client)
    # Sent inside the 500 ms backoff: before this change they failed at once.
    assert SERVING not in watch.text()
    errors: list[BaseException] = []

    def one() -> None:
        try:
            with httpclient.InferenceServerClient(server.http_url, network_timeout=60) as c:
                identity(c)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert SERVING in watch.text()


def test_the_wait_ends_when_the_new_stub_cannot_start(tmp_path: Path) -> None:
    """A new stub that hangs in initialize is given up after initialize-timeout-seconds; a request
    waiting for it then fails (it never waits without bound), and once initialize works
    again the instance serves."""
    flag = tmp_path / "hang_init"
    with (
        start(
            [MODEL],
            backend_config=[("stub-timeout-seconds", "2"), ("initialize-timeout-seconds", "2")],
            env={"RESTART_HANG_INIT_WHILE": str(flag)},
        ) as srv,
        httpclient.InferenceServerClient(srv.http_url) as client,
    ):
        flag.touch()
        _, watch = kill_stub(srv)
        first_fails_reporting(client)
        with pytest.raises(InferenceServerException) as failed:
            identity(client)  # waits (at most stub-timeout-seconds), then fails
        assert "Stub process 'restart_0_0' is not healthy" in str(failed.value)
        watch.wait("restarting the stub failed")
        # Meanwhile a request fails at once, saying why the instance is down now.
        with pytest.raises(InferenceServerException) as failed:
            identity(client)
        assert "the last attempt failed: Failed to start the Python stub for model 'restart'" in (
            str(failed.value)
        )
        assert "no INIT_REPLY from the stub within 2 s" in str(failed.value)
        flag.unlink()
        watch.wait(SERVING, timeout=30)
        identity(client)
