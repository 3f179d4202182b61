"""What model code sees of its process is the same in-process (ModelHarness, where other
models and pytest run in the same process), in a stub process (StubModel) and through
tritonserver with our backend (ServerModel):

- ``pb_utils.get_model_dir()`` is the model's version directory in every phase of its code
  (import, ``auto_complete_config``, ``initialize``, ``execute`` and a thread execute
  starts). The in-process harness once answered "" everywhere, so a model writing beside
  its files wrote into the parent of the working directory.
- ``signal.signal`` works in ``initialize`` and ``execute``, and ``asyncio.get_event_loop()``
  outside coroutines gives one loop across them (a stub runs them on its main thread).
- ``sys.argv`` is ``['']`` while it loads (the original's embedded interpreter), so a model
  that parses its arguments at import or in ``initialize`` gets its defaults. In-process it
  once saw pytest's arguments, and argparse failed the load."""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from model_dirs import SEEN_CONFIG, seen, write_model

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

PHASES = ["auto_complete", "execute", "import", "initialize", "thread"]


def write(root: Path, name: str) -> Path:
    return write_model(root, name, MODEL, SEEN_CONFIG.format(name=name))


def phases(model: object) -> dict:
    return json.loads(seen(model))


@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_every_phase_sees_the_version_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type
) -> None:
    # A wrong answer ("" or a relative path) would write the marker under this directory.
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    model_dir = write(tmp_path / "repo", "where")
    with kind(model_dir) as model:
        got = phases(model)
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
        got_a, got_b = phases(a), phases(b)
    assert got_a == {phase: str(first / "1") for phase in PHASES}
    assert got_b == {phase: str(second / "1") for phase in PHASES}


ARGPARSE_MODEL = """
import argparse

import numpy as np
import triton_python_backend_utils as pb_utils


def options():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=2.0)
    return parser.parse_args()


AT_IMPORT = options()


class TritonPythonModel:
    def initialize(self, args):
        self.scale = options().scale * AT_IMPORT.scale

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = pb_utils.Tensor("Y", (x * self.scale).astype(np.float32))
            out.append(pb_utils.InferenceResponse([y]))
        return out
"""

ARGPARSE_CONFIG = """
name: "argparse_model"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_a_model_parsing_its_arguments_loads_with_its_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type
) -> None:
    # Arguments of the test process that the model's parser does not know.
    argv = ["pytest", "-q", "--pybackend-mode=inprocess"]
    monkeypatch.setattr(sys, "argv", argv)
    model_dir = write_model(tmp_path, "argparse_model", ARGPARSE_MODEL, ARGPARSE_CONFIG)
    with kind(model_dir) as model:
        got = model.infer({"X": np.array([1.5], np.float32)})
    assert got["Y"].tolist() == [6.0]  # 1.5 * 2.0 (initialize) * 2.0 (import)
    assert sys.argv is argv  # the test's own list is back


SIGNAL_MODEL = """
import signal

import numpy as np
import triton_python_backend_utils as pb_utils


def handler(signum, frame):
    pass


class TritonPythonModel:
    def initialize(self, args):
        signal.signal(signal.SIGUSR1, handler)

    def execute(self, requests):
        signal.signal(signal.SIGUSR2, handler)
        both = signal.getsignal(signal.SIGUSR1) is handler is signal.getsignal(signal.SIGUSR2)
        text = np.array([b"installed" if both else b"missing"], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests]
"""


@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_a_model_installs_signal_handlers(tmp_path: Path, kind: type) -> None:
    """A stub runs initialize and execute on its main thread, where Python allows
    signal.signal; in-process they run on worker threads while the test's main thread
    waits, and it makes the call for them (once refused: the load failed with Python's
    `signal only works in main thread of the main interpreter`)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    model_dir = write_model(tmp_path, "signals", SIGNAL_MODEL, SEEN_CONFIG.format(name="signals"))
    try:
        with kind(model_dir) as model:
            assert seen(model) == "installed"
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    # Where the main thread is not waiting for model code, another thread's call is
    # Python's own refusal, at once.
    refused: list = []

    def elsewhere() -> None:
        try:
            signal.signal(signal.SIGUSR1, signal.getsignal(signal.SIGUSR1))
        except ValueError as e:
            refused.append(str(e))

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(5)
    assert refused == ["signal only works in main thread of the main interpreter"]


LOOP_MODEL = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


async def double(x):
    return 2 * x


class TritonPythonModel:
    def initialize(self, args):
        self.loop = asyncio.get_event_loop()  # as older model.py files do

    def execute(self, requests):
        value = self.loop.run_until_complete(double(21))
        same = asyncio.get_event_loop() is self.loop
        if "OWN" in self.__dict__:
            same = asyncio.get_event_loop() is self.OWN
            self.OWN.close()
        self.OWN = asyncio.new_event_loop()  # set by the model: its next call gets it
        asyncio.set_event_loop(self.OWN)
        text = np.array([f"{value} {same}".encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests]

    def finalize(self):
        self.OWN.close()
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_asyncio_get_event_loop_outside_coroutines(tmp_path: Path, kind: type) -> None:
    """A stub runs initialize and execute on its main thread, where asyncio makes a loop
    when first asked and keeps the one the model sets; in-process the worker threads have
    none, and `asyncio.get_event_loop()` in initialize failed the load (`There is no current
    event loop in thread ...`)."""
    if sys.version_info >= (3, 14):
        pytest.skip("Python 3.14 makes no loop where none is set, in a stub either")
    model_dir = write_model(tmp_path, "loops", LOOP_MODEL, SEEN_CONFIG.format(name="loops"))
    with kind(model_dir) as model:
        assert [seen(model) for _ in range(3)] == ["42 True"] * 3
