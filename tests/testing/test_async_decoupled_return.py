"""A decoupled ``async def execute`` that returns a value, offline (both engines) as in the
server (tests/conformance/decoupled/test_qa_response_sender.py): the error is logged, a
request whose sender the model kept is still answered by it, and one whose sender was never
taken ends with the original's text (stub/returns.py refused_by_async_decoupled)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pybackend.testing import InferError, ModelHarness, StubModel

MODEL = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()

    async def execute(self, requests):
        for request in requests:
            if pb_utils.get_input_tensor_by_name(request, "KEEP").as_numpy()[0]:
                task = asyncio.get_running_loop().create_task(
                    self.later(request.get_response_sender())
                )
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        return [pb_utils.InferenceResponse([]) for _ in requests]

    async def later(self, sender):
        await asyncio.sleep(0.05)
        out = pb_utils.Tensor("OUT", np.array([7], np.int32))
        sender.send(
            pb_utils.InferenceResponse([out]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        )
"""

CONFIG = """name: "returns"
backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "KEEP" data_type: TYPE_BOOL dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    (tmp_path / "returns" / "1").mkdir(parents=True)
    (tmp_path / "returns" / "1" / "model.py").write_text(MODEL)
    (tmp_path / "returns" / "config.pbtxt").write_text(CONFIG)
    return tmp_path / "returns"


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_kept_sender_still_answers(model_dir: Path, kind: Any) -> None:
    with kind(model_dir) as model:
        got = model.infer_stream({"KEEP": np.array([True])}, timeout=10)
        assert [r["OUT"].tolist() for r in got] == [[7]]


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_request_without_a_sender_gets_the_error(model_dir: Path, kind: Any) -> None:
    with kind(model_dir) as model:
        with pytest.raises(InferError) as info:
            model.infer_stream({"KEEP": np.array([False])}, timeout=10)
        assert (
            "Python model 'returns_0' is using the decoupled mode and the execute function "
            "must return None."
        ) in str(info.value)
