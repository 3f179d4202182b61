"""Debug mode (PYBACKEND_DEBUG, UV-26) through the real server and a real stub: debugpy
listens in the instance's stub, a stub that takes longer than execute-timeout-seconds (as
at a breakpoint) is not given up, pdb opens on the server's terminal (a pseudo-terminal
here), and what cannot work (no terminal, an unknown mode, a bad port, more than one
instance) fails the load with the fix."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from pybackend.server import TritonServer
from pybackend.server.processes import alive, free_ports, with_arguments

EXECUTE_TIMEOUT_S = 1

MODEL = """
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            time.sleep(float(pb_utils.get_input_tensor_by_name(r, "SLEEP").as_numpy()[0]))
            pid = np.array([os.getpid()], np.int64)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("PID", pid)]))
        return out
"""


def config(debug: str | None, count: int = 1) -> str:
    doc: dict[str, Any] = {
        "backend": "python",
        "input": [{"name": "SLEEP", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "PID", "data_type": "TYPE_INT64", "dims": [1]}],
        "instance_group": [{"count": count, "kind": "KIND_CPU"}],
    }
    if debug is not None:
        doc["parameters"] = {"PYBACKEND_DEBUG": {"string_value": debug}}
    return json.dumps(doc)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("debug_models")
    (repo / "debuggee" / "1").mkdir(parents=True)
    (repo / "debuggee" / "1" / "model.py").write_text(MODEL)
    (repo / "debuggee" / "config.pbtxt").write_text('backend: "python"\n')
    with TritonServer(
        repo,
        model_control_mode="explicit",
        backend_config=[("execute-timeout-seconds", str(EXECUTE_TIMEOUT_S))],
    ) as s:
        yield s


@pytest.fixture
def client(server: TritonServer) -> Iterator[Any]:
    c = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    yield c
    c.close()


def infer(client: Any, sleep: float) -> int:
    inp = httpclient.InferInput("SLEEP", [1], "FP32")
    inp.set_data_from_numpy(np.array([sleep], np.float32))
    return int(client.infer("debuggee", [inp]).as_numpy("PID")[0])


def test_debugpy_listens_and_no_execute_timeout(server: TritonServer, client: Any) -> None:
    (port,) = free_ports(1)
    client.load_model("debuggee", config=config(f"debugpy:127.0.0.1:{port}"))
    try:
        assert f"debugpy listens on 127.0.0.1:{port}" in server.log_text()
        assert "debug mode (PYBACKEND_DEBUG=debugpy" in server.log_text()
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # an IDE could attach here
        # The adapter detaches from the stub (its parent is init): found by its arguments.
        adapters = with_arguments(b"debugpy", str(port).encode())
        assert adapters, "debugpy's adapter process runs beside the stub"
        # Longer than execute-timeout-seconds, as a stop at a breakpoint would be.
        t0 = time.monotonic()
        pid = infer(client, EXECUTE_TIMEOUT_S + 1.0)
        assert time.monotonic() - t0 >= EXECUTE_TIMEOUT_S + 1.0
        assert infer(client, 0) == pid  # the same stub: it was not taken for a hung one
    finally:
        client.unload_model("debuggee")
    deadline = time.monotonic() + 30
    while any(alive(p) for p in adapters) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in adapters if alive(p)], "the adapter ends with the stub"


def test_without_debug_mode_the_execute_timeout_holds(server: TritonServer, client: Any) -> None:
    client.load_model("debuggee", config=config(None, count=1))
    try:
        with pytest.raises(InferenceServerException) as info:
            infer(client, EXECUTE_TIMEOUT_S + 2.0)
        assert f"execute-timeout-seconds={EXECUTE_TIMEOUT_S}" in str(info.value)
    finally:
        client.unload_model("debuggee")


@pytest.mark.parametrize(
    "value, expected",
    [
        (
            "pdb",
            "PYBACKEND_DEBUG=pdb (model 'debuggee', instance 'debuggee_0_0') needs the "
            "server's terminal",
        ),
        (
            "gdb",
            "PYBACKEND_DEBUG='gdb' (model 'debuggee', instance 'debuggee_0_0') is not a "
            "debug mode: use pdb, debugpy[:[HOST:]PORT] or debugpy-wait[:[HOST:]PORT]",
        ),
        ("debugpy:http", "PYBACKEND_DEBUG='debugpy:http': 'http' is not a port number"),
    ],
)
def test_a_debug_mode_that_cannot_work_fails_the_load(
    server: TritonServer, client: Any, value: str, expected: str
) -> None:
    # tritonserver runs in a session of its own, without a terminal: pdb has nowhere to go.
    with pytest.raises(InferenceServerException) as info:
        client.load_model("debuggee", config=config(value))
    assert expected in str(info.value), str(info.value)
    assert not client.is_model_ready("debuggee")


def test_debug_mode_needs_one_instance(server: TritonServer, client: Any) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.load_model("debuggee", config=config("debugpy", count=2))
    assert (
        "model 'debuggee': PYBACKEND_DEBUG=debugpy debugs one instance, and the configuration "
        "has 2: set instance_group [ { count: 1 } ] while debugging"
    ) in str(info.value), str(info.value)


PDB_DRIVER = """
import sys
from pathlib import Path
import numpy as np
sys.path.insert(0, {tests!r})
from fake_backend import started

with started(Path({model!r}), debug="pdb") as fb:
    result = fb.execute([{{}}])
    print("OUT", result["items"][0]["outputs"]["OUT"].tolist(), flush=True)
    fb.finalize()
"""

PDB_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        answer = 1
        breakpoint()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([answer]))])
                for _ in requests]
"""


def test_pdb_on_the_servers_terminal(tmp_path: Path) -> None:
    """A real stub whose backend runs on a (pseudo-)terminal: breakpoint() in execute opens
    pdb there; what is typed at the prompt changes what the model returns."""
    model = tmp_path / "pdbm" / "1" / "model.py"
    model.parent.mkdir(parents=True)
    model.write_text(PDB_MODEL)
    script = PDB_DRIVER.format(tests=str(Path(__file__).parents[1] / "stub"), model=str(model))
    pid, master = pty.fork()  # the child: a session of its own, the pty its terminal
    if pid == 0:
        try:
            os.execv(sys.executable, [sys.executable, "-c", script])
        finally:
            os._exit(127)
    seen = b""
    try:
        seen = _read_until(master, b"(Pdb) ", seen)
        os.write(master, b"answer = 6 * 7\n")
        seen = _read_until(master, b"(Pdb) ", seen)
        os.write(master, b"c\n")
        seen = _read_to_end(master, seen)  # the driver prints OUT and exits
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")
    assert b"OUT [42]" in seen, seen.decode(errors="replace")
    assert b"model.py" in seen  # pdb shows where it stopped


def _read_to_end(fd: int, seen: bytes, timeout: float = 30.0) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"the terminal stayed open; so far: {seen!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child side closed
            return seen
        if not chunk:
            return seen
        seen += chunk


def _read_until(fd: int, marker: bytes, seen: bytes, timeout: float = 30.0) -> bytes:
    start = len(seen)
    deadline = time.monotonic() + timeout
    while marker not in seen[start:]:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no {marker!r} on the terminal; so far: {seen!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            raise AssertionError(f"the terminal closed before {marker!r}; so far: {seen!r}")
        seen += chunk
    return seen
