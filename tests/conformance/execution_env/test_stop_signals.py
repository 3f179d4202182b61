"""SIGTERM and SIGINT reaching a stub: the original's stub ignores both (a handler that does
nothing), so a SIGTERM sent to every process of the server (systemd's stop with its default
KillMode=control-group, a container runtime's or supervisor's kill of the whole group) or a
Ctrl-C leaves tritonserver to shut down gracefully: requests in flight finish and every
model's finalize runs. What a model starts gets the defaults: a program it runs ends on
either signal. Ours died of SIGTERM (and restarted), and the programs a model started
ignored SIGINT (an inherited SIG_IGN); pybackend/stub/stop_signals.py. (Our stubs have a
process group of their own, so a signal to the server's group does not reach them at all;
the original's are in the server's group.)"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from conformance_support.clients import bytes_input, infer, text_output
from pybackend.server.processes import alive, descendants


def ask(server, cmd: str, timeout: float = 60.0) -> str:
    result = infer(
        server, "http", "stop_signals", {"CMD": bytes_input(cmd)}, client_timeout=timeout
    )
    return text_output(result, "OUT")


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(["stop_signals"]) as server:
        yield server


def test_sigterm_and_sigint_sent_to_a_stub_leave_it_serving(server):
    pid = int(ask(server, "pid"))
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGINT)
    time.sleep(1.0)  # a stub that dies of it is seen gone (and restarted) well within this
    assert alive(pid)
    assert int(ask(server, "pid")) == pid  # the same process, not a restarted one
    assert "SIGTERM" not in server.log_text()


def test_programs_a_model_starts_end_on_either_signal(server):
    fates = json.loads(ask(server, "children", timeout=120))
    assert fates["program SIGTERM"] == f"ended {-signal.SIGTERM}"
    assert fates["program SIGINT"] == f"ended {-signal.SIGINT}"
    # A forked worker inherits the stub's handler: SIGINT is ignored there, as in the stub.
    assert fates["forked SIGINT"] == "survived"


@pytest.mark.deviation(
    "a worker model.py forks (multiprocessing's fork) inherits the original's handler, so "
    "SIGTERM (Process.terminate()) is ignored there and join() waits for good; ours gives the "
    "forked process SIGTERM's default back"
)
def test_a_forked_worker_ends_on_sigterm(server):
    fates = json.loads(ask(server, "children", timeout=120))
    assert fates["forked SIGTERM"] == f"ended {-signal.SIGTERM}"


def test_sigterm_to_every_process_finishes_requests_and_finalizes(feature_repository, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    start = feature_repository.start(
        model_control_mode="explicit",
        load_models=["stop_signals"],
        env={"STOP_SIGNALS_DIR": str(marks)},
    )
    with start as srv:
        pid = int(ask(srv, "pid"))
        everyone = [srv.pid, *descendants(srv.pid)]
        assert pid in everyone
        answer: dict[str, str] = {}

        def slow() -> None:
            try:
                answer["out"] = ask(srv, "sleep:2")
            except Exception as e:  # noqa: BLE001 - reported by the assertion below
                answer["error"] = str(e)

        caller = threading.Thread(target=slow)
        caller.start()
        time.sleep(0.7)  # the request is in execute (it sleeps 2 s there)
        for each in everyone:  # as systemd stops a service: every process of its cgroup
            os.kill(each, signal.SIGTERM)
        caller.join(60)
        assert answer == {"out": "slept"}
        deadline = time.monotonic() + 60
        while alive(srv.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(srv.pid)
        log = srv.log_text()
    assert sorted(p.name for p in marks.iterdir()) == [f"finalized-{pid}"], log[-3000:]
    assert not alive(pid)
