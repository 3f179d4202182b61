"""A decoupled ``async def execute`` that raises, offline (both engines) as in the server
(tests/conformance/decoupled/test_decoupled_send.py): a sender the model handed to a task
still answers; one it took and dropped ends its request with the traceback text; a request
whose sender was never taken ends with it at once (stub/returns.py
refused_by_async_decoupled, stub/state.py fail_on_drop, testing/harness_drops.py). One that
returns a value instead gets the same treatment with the original's text for that."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List

import numpy as np
import pytest

from pybackend.testing import InferError, ModelHarness, Outputs, StubModel

MODEL = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()

    async def execute(self, requests):
        returns = False
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            returns = mode >= 10  # end by returning a value instead of raising
            mode %= 10
            if mode == 1:  # hand the sender to a task, which answers after the raise
                task = asyncio.get_running_loop().create_task(
                    self.later(request.get_response_sender())
                )
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            elif mode == 2:  # use the sender, then drop it with this frame
                request.get_response_sender().send(out(0))
        if returns:
            return [None]
        raise ValueError("boom in the coroutine")

    async def later(self, sender):
        await asyncio.sleep(0.05)
        sender.send(out(1))
        sender.send(out(2))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

CONFIG = """name: "raises"
backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""

ERROR = (
    "Failed to process the request(s) for model 'raises_0', message: "
    "ValueError: boom in the coroutine"
)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    (tmp_path / "raises" / "1").mkdir(parents=True)
    (tmp_path / "raises" / "1" / "model.py").write_text(MODEL)
    (tmp_path / "raises" / "config.pbtxt").write_text(CONFIG)
    return tmp_path / "raises"


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_task_answers_after_the_coroutine_raised(model_dir: Path, kind: Any) -> None:
    with kind(model_dir) as model:
        got = model.infer_stream({"MODE": np.array([1], np.int32)}, timeout=10)
        assert [r["OUT"].tolist() for r in got] == [[1], [2]]


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_dropped_sender_ends_with_the_traceback(model_dir: Path, kind: Any) -> None:
    seen: List[Outputs] = []
    with kind(model_dir) as model:
        with pytest.raises(InferError) as info:
            model.infer_stream(
                {"MODE": np.array([2], np.int32)}, timeout=10, on_response=seen.append
            )
    assert [r["OUT"].tolist() for r in seen] == [[0]]
    assert str(info.value).startswith(ERROR), str(info.value)
    assert "The response sender" not in str(info.value)  # not the generic dropped text


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_request_without_a_sender_gets_the_error(model_dir: Path, kind: Any) -> None:
    with kind(model_dir) as model:
        with pytest.raises(InferError) as info:
            model.infer_stream({"MODE": np.array([0], np.int32)}, timeout=10)
    assert str(info.value).startswith(ERROR), str(info.value)


RETURNED = (
    "Failed to process the request(s) for model 'raises_0', message: Python model 'raises_0' "
    "is using the decoupled mode and the execute function must return None."
)


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_returning_a_value_is_treated_as_raising(model_dir: Path, kind: Any) -> None:
    seen: List[Outputs] = []
    with kind(model_dir) as model:
        got = model.infer_stream({"MODE": np.array([11], np.int32)}, timeout=10)
        assert [r["OUT"].tolist() for r in got] == [[1], [2]]  # the task still answers
        with pytest.raises(InferError) as info:  # a dropped sender: the return's text
            model.infer_stream(
                {"MODE": np.array([12], np.int32)}, timeout=10, on_response=seen.append
            )
        assert str(info.value).startswith(RETURNED), str(info.value)
        with pytest.raises(InferError) as info:  # never taken: the text at once
            model.infer_stream({"MODE": np.array([10], np.int32)}, timeout=10)
        assert str(info.value).startswith(RETURNED), str(info.value)
    assert [r["OUT"].tolist() for r in seen] == [[0]]
