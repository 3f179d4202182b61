"""StubModel: a model.py in a real stub process driven from the test, no server. What only
this mode shows (the model's own process, its output, a crash) and the parts of the harness
it must match: BLS fakes, metrics, logs, and the backend's texts for refused return values."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_dirs import write_model

from pybackend.server.processes import alive
from pybackend.testing import InferError, ModelHarness, StubModel
from pybackend.testing.harness_bounds import STOP_TIMEOUT_S
from pybackend.utils.errors import ErrorCode

REPO = Path(__file__).resolve().parents[2] / "examples" / "model_repository"

IO = """name: "{name}"
backend: "python"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
"""


def _write_model(root: Path, name: str, source: str) -> Path:
    return write_model(root, name, source, IO.format(name=name))


PROCESS = """
import os, sys
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        print("hello from", args["model_instance_name"], flush=True)
        self.family = pb_utils.MetricFamily(
            name="seen", description="values seen", kind=pb_utils.MetricFamily.COUNTER)
        self.seen = self.family.Metric(labels={"model": args["model_name"]})

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            if x.size and x[0] < 0:
                os._exit(3)  # a crash in model code, as a segfault in an extension would be
            self.seen.increment(int(x.size))
            pb_utils.Logger.log_info(f"{x.size} values")
            y = np.full_like(x, os.getpid())
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
        return out
"""


def test_the_model_runs_in_a_process_of_its_own(tmp_path: Path) -> None:
    with StubModel(_write_model(tmp_path, "proc", PROCESS)) as model:
        pid = model.pid
        y = model.infer({"X": np.ones(3, np.float32)})["Y"]
        assert y.tolist() == [pid] * 3 and pid != os.getpid()
        model.infer({"X": np.ones(2, np.float32)})
        assert f"hello from {model.instance_name}" in model.output
        assert [(r.level, r.message) for r in model.logs] == [(0, "3 values"), (0, "2 values")]
        (metric,) = model.metrics.values()
        assert (metric.family, metric.labels, metric.value) == ("seen", {"model": "proc"}, 5)


def test_a_crashing_stub_fails_the_request_and_closes(tmp_path: Path) -> None:
    model = StubModel(_write_model(tmp_path, "crash", PROCESS)).start()
    try:
        with pytest.raises(InferError) as info:
            model.infer({"X": np.array([-1], np.float32)})
        text = info.value.message
        assert f"the stub process of model 'crash' (instance '{model.instance_name}')" in text, text
        assert "exited with code 3 while it ran the request" in text, text
    finally:
        model.close()  # returns: the stub is gone, nothing to finalize
    assert model.pid is None


def test_bls_to_fakes_and_to_other_stub_models() -> None:
    import triton_python_backend_utils as pb_utils

    seen = []

    def fake_add_sub(request: Any) -> Any:
        seen.append((request.model_name(), sorted(request.requested_output_names())))
        x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 0 + 7)])

    text = np.array([b"hello world"], np.object_)
    inputs = {"TEXT": text, "WEIGHTS": np.zeros(4, np.float32)}
    with StubModel(REPO / "bls_preprocess"), StubModel(REPO / "bls_postprocess"):
        with StubModel(REPO / "bls_pipeline", bls={"add_sub": fake_add_sub}) as model:
            out = model.infer(inputs)
    assert [name for name, _ in seen] == ["add_sub"]
    assert out["SCORES"].tolist() == [7, 7, 7, 7]
    # Without its callees the pipeline answers with the BLS error, as under the server.
    with StubModel(REPO / "bls_pipeline") as model:
        with pytest.raises(InferError) as info:
            model.infer(inputs)
    assert "Model 'bls_preprocess' is not ready." in info.value.message


WRONG_COUNT = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return []
"""


def test_refused_return_values_read_as_in_process(tmp_path: Path) -> None:
    """The stub's texts and the in-process harness's are the same (they share the checks)."""
    model_dir = _write_model(tmp_path, "wrong_count", WRONG_COUNT)
    x = {"X": np.ones(1, np.float32)}
    texts = []
    for kind in (ModelHarness, StubModel):
        with kind(model_dir) as model:
            with pytest.raises(InferError) as info:
                model.infer(x)
        assert info.value.code == ErrorCode.INTERNAL
        texts.append(info.value.message)
    assert texts[0] == texts[1], texts
    assert "InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0" in texts[1]


def test_a_model_that_fails_to_load_says_why(tmp_path: Path) -> None:
    broken = _write_model(tmp_path, "broken", "import no_such_module_here\n")
    with pytest.raises(Exception) as info:
        StubModel(broken).start()
    assert "No module named 'no_such_module_here'" in str(info.value)


def test_a_debug_mode_it_cannot_honour_fails_the_start(tmp_path: Path) -> None:
    model_dir = _write_model(tmp_path, "dbg", WRONG_COUNT)
    with pytest.raises(Exception) as info:
        StubModel(model_dir, debug="gdb").start()
    assert "PYBACKEND_DEBUG='gdb'" in str(info.value) and "is not a debug mode" in str(info.value)


HANGS = """
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        time.sleep(3600)
"""


def test_a_hung_execute_times_out_and_close_returns(tmp_path: Path) -> None:
    model = StubModel(_write_model(tmp_path, "hangs", HANGS), execute_timeout=1.0).start()
    pid = model.pid
    try:
        t0 = time.monotonic()
        with pytest.raises(InferError) as info:
            model.infer({"X": np.ones(1, np.float32)})
        assert time.monotonic() - t0 < 10
        assert "took longer than execute_timeout=1 s: the stub was killed" in info.value.message
    finally:
        model.close()
    assert pid is not None and not alive(pid)


def test_closing_during_a_hung_execute_does_not_hang(tmp_path: Path) -> None:
    model = StubModel(_write_model(tmp_path, "hangs", HANGS)).start()
    pid = model.pid
    caller = threading.Thread(target=_infer_quietly, args=(model,), daemon=True)
    caller.start()
    time.sleep(0.5)  # the execute is running
    t0 = time.monotonic()
    model.close()
    assert time.monotonic() - t0 < STOP_TIMEOUT_S + 10
    caller.join(10)
    assert pid is not None and not alive(pid)


def _infer_quietly(model: StubModel) -> None:
    try:
        model.infer({"X": np.ones(1, np.float32)})
    except InferError:
        pass  # the stub is killed under it
