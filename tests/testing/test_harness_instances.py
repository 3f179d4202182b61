"""The in-process harness runs several instances under PYBACKEND_INSTANCE_PROCESS own,
shared and fork (issue 29): each instance its own ``initialize`` args and thread, executes
of different instances at once, and ``pb_utils.shared`` one object per emulated process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from multi_instance_support import NAMES, answer, answer_at_once, config, write_model

from pybackend.testing import ModelHarness
from pybackend.testing.harness import forget_imports
from pybackend.utils.errors import TritonModelException

MODEL = """
import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

FINALIZED = []
BARRIER = {}


def load():
    return {"built_by": threading.current_thread().name}


class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        self.init_thread = threading.current_thread().name
        params = json.loads(args["model_config"]).get("parameters", {})
        if params.get("FAIL", {}).get("string_value") == args["model_instance_name"]:
            raise RuntimeError("initialize fails in " + args["model_instance_name"])
        self.weights = pb_utils.shared("weights", load)

    def execute(self, requests):
        out = []
        for request in requests:
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0]
            if wait:  # every instance meets here: only executes running at once pass
                BARRIER.setdefault(wait, threading.Barrier(int(wait))).wait(10)
            answer = {
                "instance": self.args["model_instance_name"],
                "thread": threading.current_thread().name,
                "weights": id(self.weights),
            }
            tensor = pb_utils.Tensor("OUT", np.array([json.dumps(answer)], dtype=object))
            out.append(pb_utils.InferenceResponse([tensor]))
        return out

    def finalize(self):
        FINALIZED.append(self.args["model_instance_name"])
"""


@pytest.fixture
def model_dir(tmp_path: Path):
    yield write_model(tmp_path, MODEL)
    forget_imports(tmp_path / "inst" / "1")


@pytest.mark.parametrize("mode", ["own", "shared", "fork"])
def test_each_instance_has_its_identity_and_thread(model_dir: Path, mode: str) -> None:
    with ModelHarness(model_dir, config=config(3, mode), instances=3) as model:
        assert model.instance_process == mode
        assert [i.model.args["model_instance_name"] for i in model.instances] == NAMES
        assert {i.model.args["model_instance_kind"] for i in model.instances} == {"CPU"}
        # initialize and execute run on the instance's own thread, named after it
        assert [i.model.init_thread for i in model.instances] == NAMES
        assert [answer(i)["thread"] for i in model.instances] == NAMES
        assert [answer(i)["instance"] for i in model.instances] == NAMES


@pytest.mark.parametrize(("mode", "objects"), [("own", 3), ("shared", 1), ("fork", 3)])
def test_pb_utils_shared_is_one_object_per_emulated_process(
    model_dir: Path, mode: str, objects: int
) -> None:
    with ModelHarness(model_dir, config=config(3, mode), instances=3) as model:
        weights = [i.model.weights for i in model.instances]
        assert len({id(w) for w in weights}) == objects
        assert len({answer(i)["weights"] for i in model.instances}) == objects
        if mode == "shared":  # built once, by the instance that asked first
            assert weights[0]["built_by"] in NAMES
        else:  # each by its own instance
            assert [w["built_by"] for w in weights] == NAMES


@pytest.mark.parametrize("mode", ["own", "shared", "fork"])
def test_instances_execute_at_once(model_dir: Path, mode: str) -> None:
    # Each execute waits at a barrier for 3 parties: it passes only when the three
    # instances' executes run at the same time (counted by the barrier, nothing timed).
    with ModelHarness(model_dir, config=config(3, mode), instances=3) as model:
        results = answer_at_once(model.instances, wait=3, join_s=30)
        assert [r["instance"] for r in results] == NAMES, results


def test_the_mode_comes_from_the_config_and_the_argument_overrides_it(model_dir: Path) -> None:
    with ModelHarness(model_dir, config=config(2, "shared"), instances=2) as model:
        assert model.instance_process == "shared"
        assert model.instances[0].model.weights is model.instances[1].model.weights
    with ModelHarness(
        model_dir, config=config(2, "shared"), instances=2, instance_process="own"
    ) as model:
        assert model.instance_process == "own"
        assert model.instances[0].model.weights is not model.instances[1].model.weights
    with ModelHarness(model_dir, config=config(1)) as model:
        assert model.instance_process == "own" and model.instances == [model]


def test_separate_harnesses_are_separate_processes(model_dir: Path) -> None:
    # Two harnesses of one model stand for two model loads: two processes, two tables.
    with ModelHarness(model_dir, config=config(1, "shared")) as a:
        with ModelHarness(model_dir, config=config(1, "shared"), model_name="other") as b:
            assert a.model.weights is not b.model.weights


def test_a_bad_mode_is_refused_with_the_backends_text(model_dir: Path) -> None:
    with pytest.raises(TritonModelException) as info:
        ModelHarness(model_dir, config=config(2, "threads"), instances=2).start()
    text = str(info.value)
    assert "model 'inst': incorrect value for PYBACKEND_INSTANCE_PROCESS: 'threads'" in text
    assert '"own"' in text and '"shared"' in text and '"fork"' in text
    bad = config(2, "shared", ISOLATE_GPU="true")
    with pytest.raises(TritonModelException, match="ISOLATE_GPU gives each instance"):
        ModelHarness(model_dir, config=bad, instances=2).start()


def test_more_instances_than_the_config_declares_is_refused(model_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"instances=3, but its instance_group declares 2"):
        ModelHarness(model_dir, config=config(2), instances=3).start()


@pytest.mark.parametrize("mode", ["own", "shared"])
def test_a_failing_initialize_fails_the_start_and_finalizes_the_others(
    model_dir: Path, mode: str
) -> None:
    harness = ModelHarness(model_dir, config=config(3, mode, FAIL="inst_0_1"), instances=3)
    with pytest.raises(RuntimeError, match="initialize fails in inst_0_1"):
        harness.start()
    finalized = sys.modules[_module_name(model_dir)].FINALIZED
    assert sorted(finalized) == ["inst_0_0", "inst_0_2"]
    assert harness.model is None and harness.instances == [harness]


def test_statistics_count_every_instance(model_dir: Path) -> None:
    with ModelHarness(model_dir, config=config(2), instances=2) as model:
        for instance in model.instances:
            answer(instance)
        assert model.statistics.snapshot()["inference_count"] == 2


def _module_name(model_dir: Path) -> str:
    found = [
        n
        for n, m in sys.modules.items()
        if getattr(m, "__file__", "") == str(model_dir / "1" / "model.py")
    ]
    assert found, "the model's module is not imported"
    return found[0]
