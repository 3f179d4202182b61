"""`pybackend serve`: prints working endpoints and request, and stops cleanly on a signal."""

from __future__ import annotations

import json
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from integration_support import EXAMPLES_REPOSITORY, SIGINT_IGNORED
from pybackend.server.processes import descendants, kill_quietly, wait_gone

ANY_PORTS = ["--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"]
EXPECTED_SUM = [11.0, 22.0, 33.0, 44.0]


def _serve_command(backend_kind: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pybackend.cli",
        "serve",
        str(EXAMPLES_REPOSITORY),
        "--backend",
        backend_kind,
        *ANY_PORTS,
        *extra,
    ]


def _run_printed_curl(output: str) -> dict:
    """Execute the curl command that serve printed (with urllib: curl may not be installed)."""
    line = next(line for line in output.splitlines() if line.strip().startswith("curl "))
    words = shlex.split(line)
    url = next(w for w in words if w.startswith("http://"))
    body = words[words.index("-d") + 1].encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_serve_check_prints_endpoints_and_a_working_request(backend_kind: str) -> None:
    done = subprocess.run(
        _serve_command(backend_kind, "--check"),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "HTTP     http://127.0.0.1:" in done.stdout
    assert "gRPC     127.0.0.1:" in done.stdout
    assert "model    add_sub (version 1, READY)" in done.stdout
    reply = done.stdout.split("  -> ", 1)[1]
    assert json.loads(reply.splitlines()[0])["outputs"][0]["data"] == EXPECTED_SUM


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_serve_foreground_until_signal(backend_kind: str, stop_signal: signal.Signals) -> None:
    # Started with SIGINT ignored (a script's background job): Ctrl-C must stop it all the same.
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGINT_IGNORED, *_serve_command(backend_kind)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    output = ""
    try:
        deadline = time.monotonic() + 240
        while "press Ctrl-C to stop" not in output:
            assert proc.poll() is None, f"serve exited early:\n{output}"
            assert time.monotonic() < deadline, f"serve did not become ready:\n{output}"
            try:
                output += lines.get(timeout=1)
            except queue.Empty:
                pass
        reply = _run_printed_curl(output)
        assert reply["outputs"][0]["data"] == EXPECTED_SUM
        proc.send_signal(stop_signal)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        proc.stdout.close()


def test_serve_reports_a_missing_repository(tmp_path) -> None:
    command = [sys.executable, "-m", "pybackend.cli", "serve", str(tmp_path / "missing")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "does not exist" in done.stderr


RUNTIME_CASES = Path(__file__).resolve().parents[1] / "conformance" / "python_based_backends"


def test_serve_runs_python_based_backends_given_with_runtime(backend_kind: str) -> None:
    """``--runtime NAME=DIR``: the conformance repository's four models of two runtimes
    (docs/python_based_backends.md) load and answer; without it the server refuses them."""
    runtime = RUNTIME_CASES / "runtimes" / "pbb_scaler"
    command = [
        *_serve_command(backend_kind, "--check"),
        "--runtime",
        f"pbb_scaler={runtime}",
        "--runtime",
        f"pbb_scaler_b={runtime}",
    ]
    command[command.index(str(EXAMPLES_REPOSITORY))] = str(RUNTIME_CASES / "models")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"runtime  pbb_scaler: {runtime / 'model.py'}" in done.stdout
    for model in ("pbb_double", "pbb_triple", "pbb_minimal", "pbb_other"):
        assert f"model    {model} (version 1, READY)" in done.stdout


def test_serve_refuses_a_malformed_runtime(tmp_path: Path) -> None:
    for value, text in (
        ("pbb_scaler", "--runtime pbb_scaler: expected NAME=DIR"),
        (f"empty={tmp_path}", f"runtime 'empty': {tmp_path} holds no model.py"),
    ):
        command = [sys.executable, "-m", "pybackend.cli", "serve", str(tmp_path)]
        done = subprocess.run(
            [*command, "--runtime", value], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert text in done.stderr


def test_a_killed_serve_takes_its_server_and_stubs_along() -> None:
    # SIGKILL leaves serve no chance to stop its tritonserver: the server must not outlive it
    # (an orphaned server keeps its ports and its stubs keep their memory).
    proc = subprocess.Popen(
        _serve_command("ours"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    tree: set[int] = set()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "press Ctrl-C to stop" in line:
                break
        else:
            pytest.fail("serve exited before it was ready")
        tree = descendants(proc.pid)
        assert len(tree) >= 2, "expected tritonserver and at least one stub"
        proc.kill()
        proc.wait()
        left = wait_gone(tree, 30.0)
        assert not left, f"outlived the killed serve: {sorted(left)}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in tree:
            kill_quietly(pid)
        if proc.stdout is not None:
            proc.stdout.close()
