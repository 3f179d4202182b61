"""StubModel runs several instances in real stub processes under PYBACKEND_INSTANCE_PROCESS
own, shared and fork (issue 29), as the backend runs them: a process per instance, one host
process with a thread per instance, or a host that imports model.py once and forks a child
per instance."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from multi_instance_support import NAMES, answer, answer_at_once, config, write_model

from pybackend.testing import InferError, StubModel
from pybackend.utils.errors import TritonModelException

MODEL = """
import json
import os
import threading
import time
import uuid

import numpy as np
import triton_python_backend_utils as pb_utils

IMPORTED_IN = os.getpid()  # which process imported model.py
BARRIER = {}


def load():
    return uuid.uuid4().hex


class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        params = json.loads(args["model_config"]).get("parameters", {})
        if params.get("FAIL", {}).get("string_value") == args["model_instance_name"]:
            raise RuntimeError("initialize fails in " + args["model_instance_name"])
        self.token = pb_utils.shared("weights", load)

    def execute(self, requests):
        out = []
        for request in requests:
            wait = int(pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0])
            if wait < 0:  # hangs: the execute timeout's case
                time.sleep(-wait)
            elif wait:  # only executes of several instances running at once pass it
                BARRIER.setdefault(wait, threading.Barrier(wait)).wait(20)
            answer = {
                "instance": self.args["model_instance_name"],
                "pid": os.getpid(),
                "imported_in": IMPORTED_IN,
                "token": self.token,
            }
            tensor = pb_utils.Tensor("OUT", np.array([json.dumps(answer)], dtype=object))
            out.append(pb_utils.InferenceResponse([tensor]))
        return out
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return write_model(tmp_path, MODEL)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["own", "shared", "fork"])
def test_processes_imports_and_shared_objects_per_mode(model_dir: Path, mode: str) -> None:
    with StubModel(model_dir, config=config(3, mode), instances=3) as model:
        assert model.instance_process == mode
        answers = [answer(i) for i in model.instances]
        assert [a["instance"] for a in answers] == NAMES
        pids = {a["pid"] for a in answers}
        assert pids == {i.pid for i in model.instances}
        tokens = {a["token"] for a in answers}
        imported_in = {a["imported_in"] for a in answers}
        if mode == "shared":  # one process, one import, one object
            assert len(pids) == 1 and len(tokens) == 1 and imported_in == pids
        elif mode == "fork":  # a process each, model.py imported once before the fork
            assert len(pids) == 3 and len(tokens) == 3
            assert len(imported_in) == 1 and imported_in.isdisjoint(pids)
        else:  # a process each, each imported it
            assert len(pids) == 3 and len(tokens) == 3 and imported_in == pids
        assert os.getpid() not in pids
    for pid in pids:  # closing ended every process (the host's children with it)
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


@pytest.mark.timeout(180)
def test_instances_of_a_shared_process_execute_at_once(model_dir: Path) -> None:
    # Each execute waits at a barrier for 3 parties, module state of the one process: it
    # passes only when the three instances' executes run at the same time (counted, not timed).
    with StubModel(model_dir, config=config(3, "shared"), instances=3) as model:
        results = answer_at_once(model.instances, wait=3, join_s=60)
        assert [r["instance"] for r in results] == NAMES, results


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["shared", "fork"])
def test_a_failing_initialize_fails_the_start_and_leaves_no_process(
    model_dir: Path, mode: str
) -> None:
    model = StubModel(model_dir, config=config(3, mode, FAIL="inst_0_1"), instances=3)
    with pytest.raises(TritonModelException, match="initialize fails in inst_0_1"):
        model.start()
    assert model.instances == [model] and not model.alive
    assert model._instances.host is None


@pytest.mark.timeout(120)
def test_an_execute_timeout_ends_the_shared_process_of_every_instance(model_dir: Path) -> None:
    # Threads cannot be killed: as the backend does, the whole process goes.
    with StubModel(model_dir, config=config(2, "shared"), instances=2, execute_timeout=2) as model:
        first, second = model.instances
        assert first.pid == second.pid and first.alive and second.alive
        with pytest.raises(InferError, match="execute_timeout=2"):
            answer(first, wait=-60)
        # The channel closes as the killed process exits, a moment before it can be reaped.
        deadline = time.monotonic() + 10
        while (first.alive or second.alive) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not first.alive and not second.alive


@pytest.mark.timeout(60)
def test_a_bad_mode_is_refused_with_the_backends_text(model_dir: Path) -> None:
    with pytest.raises(
        TritonModelException, match="incorrect value for PYBACKEND_INSTANCE_PROCESS"
    ):
        StubModel(model_dir, config=config(2, "threads"), instances=2).start()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


CALLER = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "WAIT")
            call = pb_utils.InferenceRequest(
                model_name="callee", inputs=[x], requested_output_names=["Y"]
            )
            y = pb_utils.get_output_tensor_by_name(call.exec(), "Y").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", y.astype(object))]))
        return out
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["own", "shared"])
def test_every_instance_reaches_the_bls_fakes(tmp_path: Path, mode: str) -> None:
    write_model(tmp_path, CALLER)
    import triton_python_backend_utils as pb_utils

    def callee(request: Any) -> Any:
        x = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()
        return pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([f"y{x[0]}"], object))])

    model = StubModel(
        tmp_path / "inst", config=config(2, mode), instances=2, bls={"callee": callee}
    )
    with model:
        for n, instance in enumerate(model.instances):
            out = instance.infer({"WAIT": np.array([n], np.int32)})
            assert out["OUT"].tolist() == [f"y{n}".encode()]
