"""--model-control-mode=poll, as operators deploy by editing a model repository: an edited
model.py is reloaded and its new code serves; a model directory that appears is loaded and one
removed is unloaded; an edit that breaks the load (initialize raises, a syntax error) leaves
the loaded model serving its old code, with the load error in the server log; fixing the file
serves the fix. In every PYBACKEND_INSTANCE_PROCESS mode (the original ignores the parameter:
one process per instance there), all on one server."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformance_support.clients import infer
from conformance_support.control import is_ready, wait_for
from conformance_support.launcher import start_server

MODES = ("own", "shared", "fork")
CONFIG = """backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "PYBACKEND_INSTANCE_PROCESS" value: { string_value: "%s" } }
"""
# OUT = IN * K; initialize runs INIT.
MODEL = """
import triton_python_backend_utils as pb_utils

K = %s


class TritonPythonModel:
    def initialize(self, args):
        %s

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * K)]
            )
            for r in requests
        ]
"""


def write_model(repo: Path, name: str, k: str, init: str = "pass") -> None:
    (repo / name / "1" / "model.py").write_text(textwrap.dedent(MODEL % (k, init)))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("poll") / "models"
    for mode in MODES:
        (root / mode / "1").mkdir(parents=True)
        (root / mode / "config.pbtxt").write_text(CONFIG % mode)
        write_model(root, mode, "2.0")
    return root


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[Any]:
    with start_server(
        repo, model_control_mode="poll", extra_args=["--repository-poll-secs=1"]
    ) as srv:
        yield srv


def value(server: Any, model: str) -> float:
    reply = infer(server, "http", model, {"IN": np.array([1.5], np.float32)})
    return float(reply.outputs["OUT"][0])


def serves(server: Any, model: str, expected: float) -> bool:
    try:
        return value(server, model) == expected
    except Exception:  # reloading: the model may be briefly unavailable to a request
        return False


def test_an_edited_model_py_is_reloaded_and_serves_its_new_code(server: Any, repo: Path) -> None:
    assert [value(server, m) for m in MODES] == [3.0, 3.0, 3.0]
    for mode in MODES:
        write_model(repo, mode, "3.0")
    for mode in MODES:
        wait_for(lambda m=mode: serves(server, m, 4.5), 30, f"{mode}'s new code to serve")


def test_an_edit_that_breaks_the_load_keeps_the_old_code_serving(server: Any, repo: Path) -> None:
    for mode in MODES:
        write_model(repo, mode, "5.0", "raise RuntimeError('broken deploy of %s')" % mode)
    for mode in MODES:
        wait_for(
            lambda m=mode: f"broken deploy of {m}" in server.log_text(),
            30,
            f"{mode}'s failed load in the server log",
        )
    assert [value(server, m) for m in MODES] == [4.5, 4.5, 4.5]
    assert all(is_ready(server, m) for m in MODES)

    log_before = server.log_text().count("SyntaxError")
    for mode in MODES:
        write_model(repo, mode, "6.0 +")  # a syntax error
    wait_for(lambda: server.log_text().count("SyntaxError") >= log_before + 3, 30, "3 loads")
    assert [value(server, m) for m in MODES] == [4.5, 4.5, 4.5]

    for mode in MODES:
        write_model(repo, mode, "4.0")
    for mode in MODES:
        wait_for(lambda m=mode: serves(server, m, 6.0), 30, f"{mode}'s fix to serve")


def test_a_model_directory_that_appears_or_goes_is_loaded_or_unloaded(
    server: Any, repo: Path
) -> None:
    shutil.copytree(repo / "own", repo / "added")
    wait_for(lambda: serves(server, "added", 6.0), 30, "the new model to serve")
    shutil.rmtree(repo / "added")
    wait_for(lambda: not is_ready(server, "added"), 30, "the removed model to unload")
    assert value(server, "own") == 6.0
