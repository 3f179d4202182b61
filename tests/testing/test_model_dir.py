"""``pb_utils.get_model_dir()`` is the model's version directory in every phase of its code
(import, ``auto_complete_config``, ``initialize``, ``execute`` and a thread execute starts),
the same in-process (ModelHarness, where other models run in the same process), in a stub
process (StubModel) and through tritonserver with our backend (ServerModel). The in-process
harness once answered "" everywhere, so a model writing beside its files wrote into the
parent of the working directory."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pybackend.testing import ModelHarness, ServerModel, StubModel

MODEL = """
import json
import os
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

SEEN = {"import": pb_utils.get_model_dir()}
MARKER = "auto_complete_saw.txt"


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        # Its own process under a stub (the server's auto-complete stub): a file beside
        # the model is how it reports.
        with open(os.path.join(pb_utils.get_model_dir(), MARKER), "w") as f:
            f.write(pb_utils.get_model_dir())
        return config

    def initialize(self, args):
        SEEN["initialize"] = pb_utils.get_model_dir()

    def execute(self, requests):
        SEEN["execute"] = pb_utils.get_model_dir()
        thread = threading.Thread(target=lambda: SEEN.update(thread=pb_utils.get_model_dir()))
        thread.start()
        thread.join()
        with open(os.path.join(os.path.dirname(__file__), MARKER)) as f:
            SEEN["auto_complete"] = f.read()
        text = np.array([json.dumps(SEEN, sort_keys=True).encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests]
"""

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }} ]
"""

PHASES = ["auto_complete", "execute", "import", "initialize", "thread"]


def write(root: Path, name: str) -> Path:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(textwrap.dedent(MODEL))
    (root / name / "config.pbtxt").write_text(CONFIG.format(name=name))
    return root / name


def seen(model: object) -> dict:
    out = model.infer({"X": np.ones(1, np.float32)})  # type: ignore[attr-defined]
    return json.loads(out["SEEN"][0])


@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_every_phase_sees_the_version_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type
) -> None:
    # A wrong answer ("" or a relative path) would write the marker under this directory.
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    model_dir = write(tmp_path / "repo", "where")
    with kind(model_dir) as model:
        got = seen(model)
    assert sorted(got) == PHASES
    assert got == {phase: str(model_dir / "1") for phase in PHASES}
    assert not list((tmp_path / "cwd").iterdir())
    assert not (tmp_path / "auto_complete_saw.txt").exists()


def test_two_models_in_one_process_each_see_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process, both models run in the test's process: a thread the model starts (which
    no harness marks) is told apart by the model's file on its stack."""
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    first, second = write(tmp_path / "repo", "first"), write(tmp_path / "repo", "second")
    with ModelHarness(first) as a, ModelHarness(second) as b:
        got_a, got_b = seen(a), seen(b)
    assert got_a == {phase: str(first / "1") for phase in PHASES}
    assert got_b == {phase: str(second / "1") for phase in PHASES}
