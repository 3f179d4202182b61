"""Backend config knobs as an operator sets them (`--backend-config=python,<key>=<value>`).

A timeout of "forever" written as a row of nines: the original accepts any positive
stub-timeout-seconds (it does not even use it), so we take it too, clamped to the longest
wait the backend can keep; before the clamp, 9999999999 s overflowed the restart wait's
deadline and a request that met a restarting stub failed at once instead of waiting.

A key the backend does not know is ignored, as by the original, but a warning names it (and
the key meant, for a misspelling such as the queue size's hyphens)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from reliability_support import LogWatch, start, stubs, wait_for
from tritonclient.utils import InferenceServerException

MODEL = "restart"
NINES = "9999999999"  # 317 years


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    config = [
        ("stub-timeout-seconds", NINES),
        ("stub-restart-max-backoff-seconds", NINES),
        ("execute-timeout-seconds", NINES),
        ("shm-message-queue-size", "10"),  # the original's key has underscores
        ("stub-timeot-seconds", "5"),
    ]
    with start([MODEL], backend_config=config) as s:
        yield s


def identity(client: Any) -> None:
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    inp = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
    inp.set_data_from_numpy(data)
    np.testing.assert_array_equal(client.infer(MODEL, [inp]).as_numpy("OUTPUT0"), data)


def test_a_timeout_of_nines_is_clamped_and_requests_wait_for_a_restart(
    server: Any, http: Any
) -> None:
    log = server.log_text()
    for key in ("stub-timeout-seconds", "stub-restart-max-backoff-seconds"):
        assert (
            f"backend config {key}={NINES} is longer than the longest wait the Python backend "
            "can keep (2147483 s, about 24 days); using 2147483 s"
        ) in log
    client = http(server, network_timeout=60)
    identity(client)
    (pid,) = stubs(server, MODEL).values()
    watch = LogWatch(server)
    os.kill(pid, signal.SIGKILL)
    wait_for("the death to be noticed", lambda: "was killed by signal 9" in watch.text())
    with pytest.raises(InferenceServerException, match="died while no request was running"):
        identity(client)  # the one that meets the dead stub reports it (as the original)
    # This one arrives while the new stub starts: it waits for it (it failed at once when the
    # deadline now + 9999999999 s wrapped around).
    identity(client)
    assert "a new stub is serving" in watch.text()


def test_unknown_keys_are_ignored_with_a_warning(server: Any) -> None:
    log = server.log_text()
    assert (
        "backend config 'shm-message-queue-size' is not a setting of the Python backend and is "
        "ignored; did you mean 'shm_message_queue_size'?"
    ) in log
    assert "backend config 'stub-timeot-seconds' is not a setting of the Python backend" in log
    # Triton's own keys, present in every backend's config, are not warned about.
    assert "'default-max-batch-size' is not a setting" not in log
    assert "'stub-timeout-seconds' is not a setting" not in log
