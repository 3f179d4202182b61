"""A model whose load takes longer than stub-timeout-seconds (model.py's import and
initialize, as one that imports torch and loads weights for minutes) loads and serves, in
every PYBACKEND_INSTANCE_PROCESS mode: the original puts no time bound on a load, and
neither does ours unless initialize-timeout-seconds sets one (test_load_failures.py holds
that bound). Before, the stub's answer to INIT was bounded by stub-timeout-seconds (30 s by
default): such a model failed to load on ours and loaded on the original.

Without a bound, unloading must not wait for a restart's load: a restarted stub still in a
long initialize is ended when its model is unloaded."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_support import LogWatch, start, stubs, wait_for

STUB_TIMEOUT_S = 2
SLOW = {"SLOW_LOAD_IMPORT_S": "1.5", "SLOW_LOAD_INIT_S": "2"}  # 3.5 s > STUB_TIMEOUT_S


@pytest.fixture(scope="module")
def hold_flag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slow_load") / "hold"


@pytest.fixture(scope="module")
def server(hold_flag: Path) -> Iterator[Any]:
    env = {**SLOW, "SLOW_LOAD_HOLD_WHILE": str(hold_flag)}
    config = [("stub-timeout-seconds", str(STUB_TIMEOUT_S))]
    with start([], backend_config=config, env=env) as s:
        yield s


def _identity(server: Any, model: str) -> list[float]:
    import tritonclient.http as httpclient

    with httpclient.InferenceServerClient(server.http_url) as client:
        inp = httpclient.InferInput("IN", [1], "FP32")
        inp.set_data_from_numpy(np.array([2.5], np.float32))
        return list(client.infer(model, [inp]).as_numpy("OUT"))


@pytest.mark.parametrize("model", ["slow_load", "slow_load_fork", "slow_load_shared"])
def test_a_load_longer_than_stub_timeout_seconds_loads(server: Any, model: str) -> None:
    import tritonclient.http as httpclient

    with httpclient.InferenceServerClient(server.http_url, network_timeout=120) as client:
        t0 = time.monotonic()
        client.load_model(model)
        took = time.monotonic() - t0
        try:
            assert took > STUB_TIMEOUT_S  # the load did outlive the stub bound
            assert client.is_model_ready(model)
            assert _identity(server, model) == [2.5]
        finally:
            client.unload_model(model)


def test_unload_ends_a_restart_still_loading(server: Any, hold_flag: Path) -> None:
    import tritonclient.http as httpclient

    with httpclient.InferenceServerClient(server.http_url, network_timeout=120) as client:
        client.load_model("slow_load")
        (pid,) = stubs(server, "slow_load").values()
        hold_flag.touch()  # the new stub's initialize holds (up to 60 s)
        try:
            watch = LogWatch(server)
            os.kill(pid, signal.SIGKILL)
            watch.wait("starting a new one")
            wait_for("the new stub", lambda: set(stubs(server, "slow_load").values()) - {pid})
            t0 = time.monotonic()
            client.unload_model("slow_load")
            wait_for("the unload", lambda: not client.is_model_ready("slow_load"))
            wait_for("no stub left", lambda: not stubs(server, "slow_load"), timeout=10)
            assert time.monotonic() - t0 < 20, "the unload waited for the restart's load"
            assert "restarting the stub failed" not in watch.text()
        finally:
            hold_flag.unlink(missing_ok=True)
