"""At model load the backend spawns the first instance's stub before it runs auto-complete
(csrc/backend/model_state.cc, SpawnSpare), so the two interpreters start side by side
instead of one after the other; the instance then adopts that stub. A load that fails
before any instance comes ends the early stub quietly: no process or error left."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from integration_support.echo_model import write_echo_repository
from pybackend.server import TritonServer
from pybackend.server.processes import alive, descendants


def _stubs(server: TritonServer) -> dict[str, int]:
    """Live stub processes of the server: instance name -> pid."""
    found = {}
    for pid in descendants(server.pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        m = re.search(r"pybackend\.stub --instance (\S+)", cmd)
        if m and alive(pid):
            found[m.group(1)] = pid
    return found


STARTED = re.compile(r"started stub pid (\d+): \S+ -m pybackend\.stub --instance ([\w.-]+)")


def _starts(log: str) -> list[tuple[str, int]]:
    """(stub name, pid) of every "started stub" log line, in order."""
    return [(m.group(2), int(m.group(1))) for m in STARTED.finditer(log)]


def test_first_instance_stub_starts_before_auto_complete_and_serves(tmp_path: Path) -> None:
    write_echo_repository(tmp_path, instances=2)
    with TritonServer(tmp_path, extra_args=["--log-verbose=1"]) as server:
        starts = _starts(server.log_text())
        names = [name for name, _ in starts]
        # echo_0_0 first, then the auto-complete stub ("echo"), then echo_0_1 as before.
        assert names == ["echo_0_0", "echo", "echo_0_1"], starts
        live = _stubs(server)
        assert set(live) == {"echo_0_0", "echo_0_1"}, live  # the auto-complete stub is gone
        assert live["echo_0_0"] == dict(starts)["echo_0_0"]  # the early stub is the instance's

        client = httpclient.InferenceServerClient(server.http_url)
        try:
            x = np.arange(8, dtype=np.float32)
            inp = httpclient.InferInput("X", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            for _ in range(4):  # both instances serve
                np.testing.assert_array_equal(client.infer("echo", [inp]).as_numpy("Y"), x * 2)
        finally:
            client.close()


AC_RAISES = """
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        raise RuntimeError("auto-complete exploded")

    def execute(self, requests):
        return []
"""

CONFIG = """backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


def test_failed_auto_complete_ends_the_early_stub_quietly(tmp_path: Path) -> None:
    (tmp_path / "ac_raises" / "1").mkdir(parents=True)
    (tmp_path / "ac_raises" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "ac_raises" / "1" / "model.py").write_text(AC_RAISES)
    with TritonServer(
        tmp_path, model_control_mode="explicit", extra_args=["--log-verbose=1"]
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            for _attempt in range(2):  # the second finds nothing left from the first
                with pytest.raises(InferenceServerException, match="auto-complete exploded"):
                    client.load_model("ac_raises")
                assert _stubs(server) == {}
        finally:
            client.close()
        log = server.log_text()
        assert [n for n, _ in _starts(log)] == ["ac_raises_0", "ac_raises"] * 2
        # Ending the unused stub is no crash: no error names it.
        assert not [
            line for line in log.splitlines() if line.startswith("E") and "ac_raises_0" in line
        ]
