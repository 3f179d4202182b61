"""`pybackend openai` (in front of a running tritonserver) and `pybackend serve
--openai-port` (beside the server it starts), as a user runs them: foreground processes
that print their URL, answer OpenAI's SDK and stop cleanly on SIGTERM."""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, TypeVar

import pytest

openai = pytest.importorskip("openai")

from integration_support import EXAMPLES_REPOSITORY  # noqa: E402
from pybackend.server import TritonServer  # noqa: E402
from pybackend.server.processes import free_ports  # noqa: E402

CLI = [sys.executable, "-m", "pybackend.cli"]
URL = re.compile(r"(http://127\.0\.0\.1:\d+/v1)")
T = TypeVar("T")


def _until_url(proc: subprocess.Popen, marker: str, timeout: float = 240) -> str:
    """The endpoint URL from the first line holding ``marker`` (its output read meanwhile)."""
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    output = ""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"the command exited early:\n{output}"
        assert time.monotonic() < deadline, f"no '{marker}' line:\n{output}"
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        output += line
        if marker in line:
            found = URL.search(line)
            assert found, line
            return found.group(1)


def _run(command: List[str], env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def _stop(proc: subprocess.Popen) -> int:
    try:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _sdk(url: str, key: str = "unused") -> Any:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)


def test_serve_with_openai_port(backend_kind: str) -> None:
    ports = ["--http-port", "0", "--grpc-port", "0", "--metrics-port", "0", "--openai-port", "0"]
    proc = _run([*CLI, "serve", str(EXAMPLES_REPOSITORY), "--backend", backend_kind, *ports])
    try:
        url = _until_url(proc, "OpenAI ")
        with _sdk(url) as client:
            answer = client.chat.completions.create(
                model="text_generation", messages=[{"role": "user", "content": "hello world"}]
            )
        assert answer.choices[0].message.content == "World Hello"
    finally:
        assert _stop(proc) == 0


def test_openai_command_in_front_of_a_server(examples_server) -> None:
    env = {**os.environ, "TEST_OPENAI_KEY": "k-123"}
    command = [*CLI, "openai", "--triton", examples_server.grpc_url, "--port", "0"]
    proc = _run([*command, "--api-key-env", "TEST_OPENAI_KEY"], env=env)
    try:
        url = _until_url(proc, "OpenAI endpoint", timeout=60)
        with _sdk(url, key="k-123") as client:
            got = client.completions.create(model="text_generation", prompt="a b")
        assert got.choices[0].text == "B A"
        with _sdk(url, key="wrong") as client, pytest.raises(openai.AuthenticationError):
            client.models.list()
    finally:
        assert _stop(proc) == 0


@pytest.mark.parametrize(
    ("command", "option", "words"),
    [
        ("openai", ["--api-key-env", "PYBACKEND_TEST_UNSET_KEY"], "the variable is not set"),
        ("openai", ["--chat-template", "/nonexistent/chat.jinja"], "/nonexistent/chat.jinja"),
        ("openai", ["--triton", "http://127.0.0.1:8000"], "over gRPC: give its gRPC port"),
        # Checked before tritonserver starts (no repository is even read).
        ("serve", ["--api-key-env", "PYBACKEND_TEST_UNSET_KEY"], "the variable is not set"),
        ("openai", ["--triton-header-env", "x-token"], "give NAME=VARIABLE"),
        ("openai", ["--openai-tls-cert", "/nonexistent/cert.pem"], "/nonexistent/cert.pem"),
        ("serve", ["--openai-tls-cert", "/nonexistent/cert.pem"], "No such file or directory"),
        (
            "openai",
            ["--triton-header-env", "x-token=PYBACKEND_TEST_UNSET_KEY"],
            "the variable is not set",
        ),
    ],
)
def test_commands_refuse_bad_options_in_one_line(
    command: str, option: List[str], words: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYBACKEND_TEST_UNSET_KEY"}
    where = (
        ["/nonexistent/repository", "--openai-port", "0"] if command == "serve" else ["--port", "0"]
    )
    done = subprocess.run(
        [*CLI, command, *where, *option],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith(f"pybackend {command}: ") and words in done.stderr
    assert "Traceback" not in done.stderr


def endpoint_parser() -> argparse.ArgumentParser:
    from pybackend.cli.openai_endpoint import add_endpoint_options

    parser = argparse.ArgumentParser()
    add_endpoint_options(parser)
    return parser


def setting(given: List[str], read: Callable[[Any], T]) -> T:
    """What ``read`` finds on the endpoint the options ``given`` make (not started)."""
    from pybackend.cli.openai_endpoint import EndpointOptions

    free = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens: the endpoint only starts
    endpoint = EndpointOptions.of(endpoint_parser().parse_args(given)).endpoint(
        free, "127.0.0.1", 0
    )
    try:
        return read(endpoint)
    finally:
        endpoint.close()


def help_text() -> str:
    return " ".join(endpoint_parser().format_help().split())


def test_openai_config_ttl_reaches_the_endpoint_its_default_said_in_the_help() -> None:
    from pybackend.openai_api.config_cache import CONFIG_TTL

    def ttl(endpoint: Any) -> float:
        return float(endpoint.upstream.configs.ttl)

    assert setting([], ttl) == CONFIG_TTL and setting(["--openai-config-ttl", "0"], ttl) == 0.0
    assert f"(default {CONFIG_TTL:g};" in help_text()
    done = subprocess.run(
        [*CLI, "openai", "--openai-config-ttl", "-1"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "give a number of seconds, 0 or more" in done.stderr


def test_openai_max_connections_reaches_the_endpoint_its_default_said_in_the_help() -> None:
    from pybackend.openai_api.listener import MAX_CONNECTIONS

    def bound(endpoint: Any) -> int:
        return int(endpoint._http.max_connections)

    assert setting([], bound) == MAX_CONNECTIONS
    assert setting(["--openai-max-connections", "0"], bound) == 0
    assert f"(default {MAX_CONNECTIONS};" in help_text()
    for bad in ("-1", "many"):
        done = subprocess.run(
            [*CLI, "openai", "--openai-max-connections", bad],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and "give a whole number, 0 or more" in done.stderr


def test_openai_timeout_must_be_positive() -> None:
    done = subprocess.run(
        [*CLI, "openai", "--openai-timeout", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "give a number of seconds above 0" in done.stderr


def test_openai_command_sends_a_restricted_server_its_token(
    backend_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    repository = tmp_path_factory.mktemp("restricted")
    shutil.copytree(EXAMPLES_REPOSITORY / "text_generation", repository / "text_generation")
    restricted = ["--grpc-restricted-protocol=model-repository:admin-key=s3cret"]
    with TritonServer(repository, backend=backend_kind, extra_args=restricted) as server:
        command = [*CLI, "openai", "--triton", server.grpc_url, "--port", "0"]
        env = {**os.environ, "TEST_ADMIN_KEY": "s3cret"}
        with_token = ["--triton-header-env", "triton-grpc-protocol-admin-key=TEST_ADMIN_KEY"]
        for extra, listed in (([], None), (with_token, ["text_generation"])):
            proc = _run([*command, *extra], env=env)
            try:
                url = _until_url(proc, "OpenAI endpoint", timeout=60)
                with _sdk(url) as client:
                    if listed is None:  # the server's refusal, passed on
                        with pytest.raises(openai.InternalServerError) as caught:
                            client.models.list()
                        assert "This protocol is restricted" in str(caught.value)
                    else:
                        assert [m.id for m in client.models.list()] == listed
            finally:
                assert _stop(proc) == 0
