"""`pybackend config DIR`: config.pbtxt gets what the model's auto_complete_config
declares, merged with what the file says; tritonserver then loads the model from the file
alone (auto-complete off)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`

AUTO_COMPLETE = Path(__file__).resolve().parents[1] / "conformance" / "auto_complete" / "models"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"

# ac_full's config.pbtxt says only `backend: "python"`; its auto_complete_config declares
# the rest.
COMPLETED = """\
# Only the backend: auto_complete_config supplies inputs, outputs, batching.
backend: "python"
max_batch_size: 8
input {
  name: "IN0"
  data_type: TYPE_FP32
  dims: 4
}
input {
  name: "IN1"
  data_type: TYPE_INT32
  dims: -1
  optional: true
}
output {
  name: "OUT0"
  data_type: TYPE_FP32
  dims: 4
}
dynamic_batching {
}
"""


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(AUTO_COMPLETE / name, tmp_path / name))


def test_dry_run_prints_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    model = _copy(tmp_path, "ac_full")
    before = (model / "config.pbtxt").read_text()
    done = cli("config", model, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout == COMPLETED
    assert (model / "config.pbtxt").read_text() == before
    diff = cli("config", model, "--diff").stdout
    assert diff.startswith(f"--- {model}/config.pbtxt (now)\n+++ {model}/config.pbtxt (completed)")
    assert "+max_batch_size: 8\n" in diff


def test_written_config_loads_without_auto_complete(cli: Cli, tmp_path: Path) -> None:
    import tritonclient.http as http

    from pybackend.server import TritonServer

    model = _copy(tmp_path, "ac_full")
    done = cli("config", model)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"saved the old file as {model}/config.pbtxt.bak",
        f"wrote {model}/config.pbtxt",
    ]
    assert (model / "config.pbtxt").read_text() == COMPLETED
    again = cli("config", model)
    assert again.stdout == (
        f"{model}/config.pbtxt: unchanged, it already says what auto_complete_config declares\n"
    )
    assert cli("validate", model).returncode == 0
    # The file alone is the model's configuration now: a server that does not
    # auto-complete serves it as the one that did.
    with TritonServer(tmp_path, extra_args=["--disable-auto-complete-config"]) as server:
        client = http.InferenceServerClient(server.http_url)
        meta = client.get_model_config("ac_full")
        assert meta["max_batch_size"] == 8
        assert [i["name"] for i in meta["input"]] == ["IN0", "IN1"]
        x = http.InferInput("IN0", [1, 4], "FP32")
        x.set_data_from_numpy(np.ones((1, 4), np.float32))
        out = client.infer("ac_full", [x]).as_numpy("OUT0")
        client.close()
    assert out.tolist() == [[2, 2, 2, 2]]


def test_decoupled_from_auto_complete(cli: Cli, tmp_path: Path) -> None:
    done = cli("config", _copy(tmp_path, "ac_decoupled"), "--dry-run")
    assert "model_transaction_policy {\n  decoupled: true\n}\n" in done.stdout


def test_a_model_without_auto_complete_is_left_alone(cli: Cli, tmp_path: Path) -> None:
    model = Path(shutil.copytree(EXAMPLES / "add_sub", tmp_path / "add_sub"))
    done = cli("config", model)
    assert done.returncode == 0
    assert (
        done.stdout == f"{model}/config.pbtxt: unchanged, the model has no auto_complete_config\n"
    )
    assert not (model / "config.pbtxt.bak").exists()


def test_a_failing_auto_complete_is_reported_as_the_server_would(cli: Cli, tmp_path: Path) -> None:
    model = _copy(tmp_path, "ac_raises")
    done = cli("config", model)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "pybackend config: model 'ac_raises': RuntimeError: auto-complete exploded\n\nAt:\n"
    )
    done = cli("config", _copy(tmp_path, "ac_returns_none"))
    assert done.stderr == (
        "pybackend config: model 'ac_returns_none': auto_complete_config function in model "
        "'ac_returns_none' must return a valid pb.ModelConfig object.\n"
    )
