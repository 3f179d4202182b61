"""RemoteTriton: bind into a tritonserver that already runs with our backend (explicit model
control, as `pybackend serve` can run it); the instances attach to this process."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pybackend.pytriton.client import ModelClient
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import RemoteTriton
from pybackend.server import TritonServer


def test_remote_triton_binds_into_a_running_server(tmp_path: Path) -> None:
    import tritonclient.http as httpclient

    (tmp_path / "repo").mkdir()
    with TritonServer(tmp_path / "repo", model_control_mode="explicit") as server:
        url = f"http://{server.http_url}"
        with RemoteTriton(url=url) as remote:
            remote.bind(
                "Remote",
                lambda requests: [{"y": r["x"] + 1} for r in requests],
                inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
                config=ModelConfig(max_batch_size=4),
            )
            with ModelClient(url, "Remote") as client:
                y = client.infer_sample(np.zeros(3, np.float32))["y"]
        # stop() unloaded the model; the server itself goes on.
        client = httpclient.InferenceServerClient(server.http_url)
        assert not client.is_model_ready("Remote")
        assert client.is_server_live()
        client.close()
    np.testing.assert_array_equal(y, np.ones(3, np.float32))


def _slow_model(repo: Path, seconds: float) -> None:
    version = repo / "slow" / "1"
    version.mkdir(parents=True)
    (repo / "slow" / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input { name: "x" data_type: TYPE_FP32 dims: [ 1 ] }\n'
        'output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] }\n'
    )
    (version / "model.py").write_text(
        "import time\n"
        "class TritonPythonModel:\n"
        f"    def initialize(self, args):\n        time.sleep({seconds})\n"
        "    def execute(self, requests):\n        return []\n"
    )


def test_remote_triton_waits_while_a_model_of_the_server_loads(tmp_path: Path) -> None:
    """Strict readiness makes the server "not ready" while any model loads or unloads
    (another client's, or the previous RemoteTriton's unload): RemoteTriton waits for it as
    PyTriton's does, up to its startup timeout, instead of failing at once."""
    import threading
    import time

    import pytest

    from pybackend.pytriton._control import ServerControl
    from pybackend.pytriton.exceptions import PyTritonRuntimeError

    _slow_model(tmp_path / "repo", 4.0)
    with TritonServer(tmp_path / "repo", model_control_mode="explicit") as server:
        url = f"http://{server.http_url}"
        control = ServerControl(server.http_url, "http", None)
        errors: list = []
        loader = threading.Thread(
            target=lambda: errors.append(control.repository("slow", "load", {}))
        )
        started = time.monotonic()
        loader.start()
        try:
            deadline = time.monotonic() + 3
            while control.ready() and time.monotonic() < deadline:
                time.sleep(0.01)  # until the load has begun
            assert control.ready() is False
            with pytest.raises(PyTritonRuntimeError, match=r"is not ready after 0.3 s"):
                with RemoteTriton(url=url, startup_timeout_s=0.3):
                    pass
            with RemoteTriton(url=url, startup_timeout_s=60):
                # entered only once initialize's 4 s had passed and the load was done
                assert time.monotonic() - started >= 4.0
        finally:
            loader.join()
        assert errors == [None]


def test_a_child_forked_by_the_callable_does_not_hide_the_process_death(tmp_path: Path) -> None:
    """A child forked by a bound callable inherits the attached instances' channels and keeps
    them open. The backend watches the attached process itself (a pidfd, csrc/backend/
    stub_attach.cc), not only its sockets, so when the user's process dies the next request
    fails at once with the instance named, instead of waiting on a channel that only the
    forgotten child still holds."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import pytest
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    from integration_support.pytriton_helpers import wait_for_line
    from pybackend.server.processes import alive

    app = Path(__file__).parent / "examples" / "forking_remote.py"
    pid_file = tmp_path / "child.pid"
    (tmp_path / "repo").mkdir()
    with TritonServer(tmp_path / "repo", model_control_mode="explicit") as server:
        proc = subprocess.Popen(
            [sys.executable, str(app), f"http://{server.http_url}", str(pid_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        child = 0
        try:
            printed = wait_for_line(proc, "SERVING")
            if printed is not None:
                pytest.fail("the app did not start:\n" + printed)
            client = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
            x = httpclient.InferInput("x", [1, 2], "FP32")
            x.set_data_from_numpy(np.zeros((1, 2), np.float32))
            got = client.infer("Forker", [x]).as_numpy("y")
            np.testing.assert_array_equal(got, np.ones((1, 2), np.float32))
            deadline = time.monotonic() + 10
            while not pid_file.exists() or not pid_file.read_text():
                assert time.monotonic() < deadline, "the forked child never wrote its pid"
                time.sleep(0.05)
            child = int(pid_file.read_text())
            proc.kill()
            proc.wait(10)
            started = time.monotonic()
            with pytest.raises(InferenceServerException) as failed:
                client.infer("Forker", [x])
            assert time.monotonic() - started < 10, "the request waited on the dead process"
            assert "'Forker'" in str(failed.value) and "has exited" in str(failed.value)
            assert alive(child), "the forked child must still hold its copies for this test"
            client.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
            if child and alive(child):
                os.kill(child, signal.SIGKILL)
