"""The harness's ``statistics``: the counters tritonserver's statistics endpoint shows for a
model, kept for every execute in both modes (the development server serves them; the
differential test in tests/devserver holds them to tritonserver)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

from pybackend.testing import InferError, ModelHarness, StubModel

REPO = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
KINDS = [ModelHarness, StubModel]


def _counts(stats: Dict[str, Any]) -> Dict[str, int]:
    flat = {k: v["count"] for k, v in stats["inference_stats"].items()}
    flat.update(inference=stats["inference_count"], executions=stats["execution_count"])
    return flat


def _batches(stats: Dict[str, Any]) -> Dict[int, int]:
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}


def _assert_durations_add_up(stats: Dict[str, Any]) -> None:
    """A completed request's time is its queue time plus its execute's three stages."""
    s = stats["inference_stats"]
    parts = s["queue"]["ns"] + sum(
        s[k]["ns"] for k in ("compute_input", "compute_infer", "compute_output")
    )
    assert s["success"]["ns"] == parts
    assert s["compute_infer"]["ns"] > 0


@pytest.mark.parametrize("kind", KINDS)
def test_completed_and_refused_requests(kind: Any) -> None:
    ones = np.ones(4, np.float32)
    with kind(REPO / "add_sub") as model:
        assert model.statistics.snapshot()["last_inference"] == 0
        before = time.time_ns() // 1_000_000
        for _ in range(2):
            model.infer({"INPUT0": ones, "INPUT1": ones})
        with pytest.raises(InferError, match="unexpected shape"):
            model.infer({"INPUT0": np.ones(5, np.float32), "INPUT1": ones})
        stats = model.statistics.snapshot()
    counts = _counts(stats)
    assert counts["success"] == counts["queue"] == counts["compute_infer"] == 2
    assert (counts["fail"], counts["inference"], counts["executions"]) == (0, 2, 2)
    assert _batches(stats) == {1: 2}
    assert stats["last_inference"] >= before
    _assert_durations_add_up(stats)


@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_counts_once_and_each_request_by_its_rows(kind: Any) -> None:
    rows = {"INPUT0": np.ones((2, 4), np.float32)}
    wrong = {"INPUT0": np.ones((2, 5), np.float32)}
    with kind(REPO / "batched_scale") as model:
        answers = model.infer_batch([rows, wrong, rows])
        stats = model.statistics.snapshot()
    assert isinstance(answers[1], InferError)  # refused: out of the batch, not counted
    counts = _counts(stats)
    assert (counts["success"], counts["inference"], counts["executions"]) == (2, 4, 1)
    assert _batches(stats) == {4: 1}
    _assert_durations_add_up(stats)


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_execute_counts_as_failure(kind: Any) -> None:
    with kind(REPO / "error_model") as model:
        with pytest.raises(InferError, match="refuses every request"):
            model.infer({"INPUT0": np.ones(3, np.float32)})
        stats = model.statistics.snapshot()
    counts = _counts(stats)
    assert (counts["fail"], counts["success"], counts["queue"]) == (1, 0, 0)
    assert (counts["inference"], counts["executions"]) == (0, 1)
    assert _batches(stats) == {1: 1}
    assert stats["inference_stats"]["fail"]["ns"] > 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_decoupled_request_counts_once(kind: Any) -> None:
    with kind(REPO / "token_stream") as model:
        responses = model.infer_stream({"PROMPT": np.array([b"a b c"], dtype=object)})
        stats = model.statistics.snapshot()
    assert len(responses) == 3
    counts = _counts(stats)
    assert (counts["success"], counts["inference"], counts["executions"]) == (1, 1, 1)


CRASHES = """
import os
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        os._exit(3)
"""


def test_a_stub_that_dies_in_execute_fails_its_request(tmp_path: Path) -> None:
    (tmp_path / "crash" / "1").mkdir(parents=True)
    (tmp_path / "crash" / "1" / "model.py").write_text(CRASHES)
    (tmp_path / "crash" / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
    )
    model = StubModel(tmp_path / "crash").start()
    try:
        with pytest.raises(InferError):
            model.infer({"X": np.ones(2, np.float32)})
        stats = model.statistics.snapshot()
    finally:
        model.close()
    counts = _counts(stats)
    assert (counts["fail"], counts["success"], counts["executions"]) == (1, 0, 1)


ANSWERS_WITH_ERRORS = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            how = pb_utils.get_input_tensor_by_name(request, "HOW").as_numpy()[0]
            error = pb_utils.InferenceResponse(error=pb_utils.TritonError("no"))
            if how == b"sent":
                request.get_response_sender().send(
                    error, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
                return None
            out.append(error)
        return out
"""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", [b"returned", b"sent"])
def test_the_models_own_error_response_is_a_success(kind: Any, how: bytes, tmp_path: Path) -> None:
    """As the original counts it: the request got the model's answer (conformance
    config_features/test_request_statistics.py); only the backend's own errors fail it."""
    (tmp_path / "answers" / "1").mkdir(parents=True)
    (tmp_path / "answers" / "1" / "model.py").write_text(ANSWERS_WITH_ERRORS)
    (tmp_path / "answers" / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "HOW" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
    )
    with kind(tmp_path / "answers") as model:
        with pytest.raises(InferError, match="no"):
            model.infer({"HOW": np.array([how], dtype=object)})
        stats = model.statistics.snapshot()
    counts = _counts(stats)
    assert (counts["success"], counts["fail"], counts["inference"]) == (1, 0, 1)
