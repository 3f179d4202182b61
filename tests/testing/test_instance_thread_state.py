"""What model.py's import and ``initialize`` leave on their thread is there in ``execute``,
in-process (ModelHarness) as in a stub process (StubModel) and through tritonserver
(ServerModel): a stub runs all of an instance's code on one thread (its main thread; under
``shared`` an instance's own thread, the import the process's main thread), and so does the
harness (the instance's thread, harness_instances.InstanceThread).

Before, the in-process harness ran each call of a one-instance model on a fresh worker
thread: an sqlite3 connection opened in ``initialize`` failed in ``execute`` ("SQLite
objects created in a thread can only be used in that same thread"), and a
``threading.local``, the ``decimal`` context and numpy's error state set there were gone."""

from __future__ import annotations

import decimal
import json
import time
from pathlib import Path

import numpy as np
import pytest
from model_dirs import SEEN_CONFIG, seen, write_model

from pybackend.testing import ModelHarness, NoResponse, ServerModel, StubModel

MODEL = """
import decimal
import json
import sqlite3
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

IMPORTED_ON = threading.current_thread()
AT_IMPORT = threading.local()
AT_IMPORT.value = "set at import"


class TritonPythonModel:
    def initialize(self, args):
        self.db = sqlite3.connect(":memory:")  # usable on the thread that opened it only
        self.db.execute("create table t (x)")
        self.local = threading.local()
        self.local.value = "set in initialize"
        decimal.getcontext().prec = 4
        np.seterr(divide="raise")
        self.thread = threading.current_thread()

    def execute(self, requests):
        # The thread itself (an ended thread's ident may be reused by the next one).
        seen = {"same thread": threading.current_thread() is self.thread}
        try:
            self.db.execute("insert into t values (1)")
            seen["sqlite"] = "ok"
        except sqlite3.ProgrammingError as e:
            seen["sqlite"] = str(e)
        seen["local"] = getattr(self.local, "value", None)
        seen["import thread"] = threading.current_thread() is IMPORTED_ON
        seen["import local"] = getattr(AT_IMPORT, "value", None)
        seen["decimal"] = str(decimal.Decimal(1) / decimal.Decimal(3))
        try:
            np.divide(np.ones(1), np.zeros(1))
            seen["numpy"] = "warned"
        except FloatingPointError:
            seen["numpy"] = "raised"
        text = np.array([json.dumps(seen, sort_keys=True).encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests]
"""

AS_IN_A_STUB = {
    "import local": "set at import",
    "import thread": True,
    "decimal": "0.3333",
    "local": "set in initialize",
    "numpy": "raised",
    "same thread": True,
    "sqlite": "ok",
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's, were its state lost
@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_what_initialize_leaves_on_its_thread_is_there_in_execute(
    tmp_path: Path, kind: type
) -> None:
    model_dir = write_model(tmp_path, "state", MODEL, SEEN_CONFIG.format(name="state"))
    with kind(model_dir) as model:
        for _ in range(3):  # each execute, not only the first
            assert json.loads(seen(model)) == AS_IN_A_STUB


def test_in_a_debug_mode_the_callers_thread_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A debug mode runs the model on the caller's thread (a breakpoint's): the same one for
    initialize and execute, so the state is there too (this test's thread: numpy's error
    state and the decimal context the model sets are put back after)."""
    monkeypatch.setenv("PYBACKEND_DEBUG", "pdb")
    model_dir = write_model(tmp_path, "state", MODEL, SEEN_CONFIG.format(name="state"))
    numpy_state = np.geterr()
    try:
        with decimal.localcontext(), ModelHarness(model_dir) as model:
            assert json.loads(seen(model)) == AS_IN_A_STUB
    finally:
        np.seterr(**numpy_state)


@pytest.mark.parametrize("mode", ["own", "shared"])
def test_each_of_several_instances_keeps_its_own(tmp_path: Path, mode: str) -> None:
    config = SEEN_CONFIG.format(name="state") + "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
    model_dir = write_model(tmp_path, "state", MODEL, config)
    # model.py is imported once in-process, on the first instance's thread (docs/testing.md).
    of_initialize = {k: v for k, v in AS_IN_A_STUB.items() if not k.startswith("import")}
    with ModelHarness(model_dir, instances=2, instance_process=mode) as model:
        for instance in model.instances:
            got = json.loads(seen(instance))
            assert {k: v for k, v in got.items() if not k.startswith("import")} == of_initialize


# execute blocks until the file RELEASE exists (20 s at most); finalize writes FINALIZED.
BLOCKS = """
import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.thread = threading.current_thread()

    def execute(self, requests):
        end = time.monotonic() + 20
        while not os.path.exists({release!r}) and time.monotonic() < end:
            time.sleep(0.01)
        same = threading.current_thread() is self.thread
        text = np.array([json.dumps(same).encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests]

    def finalize(self):
        with open({finalized!r}, "w") as f:
            f.write(threading.current_thread().name)
"""


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore::pybackend.testing.ExecuteStillRunningWarning")
def test_after_an_abandoned_execute_returns_the_instance_serves_on_its_thread(
    tmp_path: Path,
) -> None:
    release, finalized = tmp_path / "release", tmp_path / "finalized"
    body = BLOCKS.format(release=str(release), finalized=str(finalized))
    with ModelHarness(
        write_model(tmp_path, "blocks", body, SEEN_CONFIG.format(name="blocks"))
    ) as model:
        with pytest.raises(NoResponse):
            model.infer({"X": np.ones(1, np.float32)}, timeout=0.3)
        assert model.execute_still_running == "blocks_0"
        release.touch()
        end = time.monotonic() + 20
        while model.execute_still_running is not None:
            assert time.monotonic() < end, "the abandoned execute did not return"
            time.sleep(0.01)
        assert seen(model) == "true"  # the thread initialize ran on, state and all


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore::pybackend.testing.ExecuteStillRunningWarning")
def test_closing_beside_an_abandoned_execute_finalizes_on_a_new_thread(tmp_path: Path) -> None:
    """The instance's thread is still in execute: finalize does not queue behind it (which
    would hold close() 10 s and skip finalize), it runs on a new thread of the instance."""
    release, finalized = tmp_path / "release", tmp_path / "finalized"
    body = BLOCKS.format(release=str(release), finalized=str(finalized))
    model = ModelHarness(write_model(tmp_path, "blocks", body, SEEN_CONFIG.format(name="blocks")))
    model.start()
    try:
        with pytest.raises(NoResponse):
            model.infer({"X": np.ones(1, np.float32)}, timeout=0.3)
    finally:
        model.close()
    assert not release.exists()  # closed while the execute still ran
    assert finalized.read_text() == "blocks_0"
    release.touch()
