"""A `triton_python_backend_stub` left in a model directory (or its version directory): the
original runs it instead of its default stub (a custom stub built for another Python). Ours
has no stub binary and never runs it; it says so in one WARNING line per model load, naming
what chooses the interpreter here, and the model serves as usual."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from integration_support.echo_model import write_echo_repository
from pybackend.server import TritonServer

NOTICE = "triton_python_backend_stub is not needed and is not used"
# Would fail every load if it were run.
FAKE_STUB = "#!/bin/sh\necho 'a custom stub must not run' >&2\nexit 3\n"


def _repository(root: Path) -> Path:
    """echo with the stub in its model directory, echo_v with it in its version directory,
    plain with none."""
    write_echo_repository(root)
    for name in ("echo_v", "plain"):
        shutil.copytree(root / "echo", root / name)
        config = root / name / "config.pbtxt"
        config.write_text(config.read_text().replace('name: "echo"', f'name: "{name}"'))
    for stub in (root / "echo", root / "echo_v" / "1"):
        (stub / "triton_python_backend_stub").write_text(FAKE_STUB)
        (stub / "triton_python_backend_stub").chmod(0o755)
    return root


def _doubled(client: httpclient.InferenceServerClient, model: str) -> None:
    x = np.arange(3, dtype=np.float32)
    inp = httpclient.InferInput("X", [3], "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_array_equal(client.infer(model, [inp]).as_numpy("Y"), x * 2)


def _notices(server: TritonServer, model: str) -> list[str]:
    return [
        line
        for line in server.log_text().splitlines()
        if NOTICE in line and f"model '{model}'" in line
    ]


def test_a_stub_file_is_reported_once_per_load_and_not_run(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "models")
    with TritonServer(repo, backend="ours", model_control_mode="explicit") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            for loads in (1, 2):
                for model in ("echo", "echo_v", "plain"):
                    client.load_model(model)
                    _doubled(client, model)
                assert len(_notices(server, "echo")) == loads
                assert len(_notices(server, "echo_v")) == loads
                assert _notices(server, "plain") == []
                for model in ("echo", "echo_v", "plain"):
                    client.unload_model(model)
                    _wait_unloaded(client, model)
        finally:
            client.close()
        line = _notices(server, "echo")[0]
        assert line.startswith("W"), line
        assert f"{repo / 'echo' / 'triton_python_backend_stub'} is not needed" in line
        assert "EXECUTION_ENV_PATH" in line
        assert "a custom stub must not run" not in server.log_text()


def _wait_unloaded(client: httpclient.InferenceServerClient, model: str) -> None:
    deadline = time.monotonic() + 30
    while any(
        e["name"] == model and e.get("state") not in ("UNAVAILABLE", None)
        for e in client.get_model_repository_index()
    ):
        assert time.monotonic() < deadline, f"{model} did not unload"
        time.sleep(0.1)
