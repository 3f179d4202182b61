"""TritonServer itself: failures are reported with the log, and a stop never hangs or leaks."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from integration_support import EXAMPLES_REPOSITORY
from pybackend.server import ServerError, TritonServer, original_backend_dir
from pybackend.server.processes import alive, descendants


def test_server_that_exits_at_start_raises_with_its_log() -> None:
    server = TritonServer(
        EXAMPLES_REPOSITORY, backend=original_backend_dir(), extra_args=["--no-such-option=1"]
    )
    with pytest.raises(ServerError, match="exited") as caught:
        server.start()
    assert "no-such-option" in str(caught.value)
    assert not server.is_alive()


def test_urls_and_log(backend_kind: str) -> None:
    with TritonServer(EXAMPLES_REPOSITORY, backend=backend_kind) as server:
        assert server.is_ready()
        assert server.http_url.startswith("127.0.0.1:")
        assert server.grpc_url.startswith("127.0.0.1:")
        assert server.metrics_url.startswith("http://127.0.0.1:")
        assert len({server.http_port, server.grpc_port, server.metrics_port}) == 3
        assert "Started GRPCInferenceService" in server.log_text()
    assert server.returncode == 0
    assert "Started HTTPService" in server.log_text()  # still readable after stop


def test_an_explicit_mode_server_unloads_its_models_before_its_shutdown(
    backend_kind: str,
) -> None:
    # tritonserver's shutdown checks once a second whether its models are gone: unloaded
    # first, they are gone at its first check, and it exits at once.
    models = ["add_sub", "string_echo"]
    server = TritonServer(
        EXAMPLES_REPOSITORY,
        backend=backend_kind,
        model_control_mode="explicit",
        load_models=models,
    )
    with server:
        assert server.is_ready()
    assert server.returncode == 0
    log = server.log_text()
    signalled = log.index("Signal (15) received")
    for name in models:
        assert log.index(f"successfully unloaded '{name}'") < signalled
    assert "Found 0 live models" in log[signalled:]
    assert not re.search(r"Found [1-9]\d* live models", log[signalled:])


def test_a_server_refusing_the_unload_is_stopped_as_before(backend_kind: str) -> None:
    # A restricted repository API refuses the launcher's unload: the shutdown unloads.
    server = TritonServer(
        EXAMPLES_REPOSITORY,
        backend=backend_kind,
        model_control_mode="explicit",
        load_models=["add_sub"],
        extra_args=["--http-restricted-api=model-repository:admin-key=s3cret"],
    )
    with server:
        assert server.is_ready()
    assert server.returncode == 0
    log = server.log_text()
    assert log.index("Signal (15) received") < log.index("successfully unloaded 'add_sub'")


@pytest.mark.parametrize("mode", [None, "explicit"])
def test_stop_kills_a_frozen_server_and_its_stubs(backend_kind: str, mode: str | None) -> None:
    # explicit: the models' unload before the signal gives up on a server that does not answer.
    server = TritonServer(
        EXAMPLES_REPOSITORY,
        backend=backend_kind,
        stop_timeout=2.0,
        model_control_mode=mode,
        load_models=["add_sub"] if mode else [],
    )
    with server:
        tree = descendants(server.pid)
        assert tree, "the server should have started stub processes"
        os.kill(server.pid, signal.SIGSTOP)  # it can no longer shut down by itself
    assert server.returncode == -signal.SIGKILL
    assert not any(alive(pid) for pid in tree | {server.pid})


def test_stop_after_the_server_died_leaves_no_stub(backend_kind: str) -> None:
    server = TritonServer(EXAMPLES_REPOSITORY, backend=backend_kind)
    with server:
        tree = descendants(server.pid)
        os.kill(server.pid, signal.SIGKILL)  # stubs lose their parent without a shutdown
        deadline = time.monotonic() + 10
        while server.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.is_alive()
    assert server.returncode == -signal.SIGKILL
    assert not any(alive(pid) for pid in tree)
