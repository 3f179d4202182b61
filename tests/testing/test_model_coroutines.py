"""What a model's methods return that is (or looks like) a coroutine is handled by one rule
in-process (ModelHarness), in a stub process (StubModel) and through tritonserver with our
backend (ServerModel):

- ``execute`` returning a generator runs it as a coroutine (what ``asyncio.iscoroutine``
  took in the original's Python) and fails the batch there, in all three; in-process it was
  judged as a return value instead, with another error;
- ``async def initialize`` runs to its end (a deviation: the original drops the coroutine,
  docs/compatibility.md), ``async def finalize`` is not awaited, as on the original; in-process
  it ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_dirs import SEEN_CONFIG, seen, write_model

from pybackend.testing import InferError, ModelHarness, ServerModel, StubModel

ENGINES = [ModelHarness, StubModel, ServerModel]

GENERATOR = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        text = np.array([b"x"], np.object_)
        return (pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests)
"""

LIFECYCLE = """
import asyncio
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def initialize(self, args):
        await asyncio.sleep(0)
        self.ran = "initialize ran"

    def execute(self, requests):
        text = np.array([getattr(self, "ran", "initialize did not run").encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests]

    async def finalize(self):
        await asyncio.sleep(0)
        with open(os.path.join(os.path.dirname(__file__), "finalized"), "w") as f:
            f.write("yes")
"""


@pytest.mark.parametrize("kind", ENGINES)
def test_a_generator_from_execute_runs_as_a_coroutine_and_fails(tmp_path: Path, kind: type) -> None:
    model_dir = write_model(tmp_path, "gen", GENERATOR, SEEN_CONFIG.format(name="gen"))
    with kind(model_dir) as model:
        with pytest.raises(InferError) as refused:
            seen(model)
    assert "TypeError: object generator can't be used in 'await' expression" in str(refused.value)


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
@pytest.mark.parametrize("kind", ENGINES)
def test_async_initialize_runs_and_async_finalize_is_not_awaited(
    tmp_path: Path, kind: type
) -> None:
    model_dir = write_model(tmp_path, "life", LIFECYCLE, SEEN_CONFIG.format(name="life"))
    with kind(model_dir) as model:
        assert seen(model) == "initialize ran"
    assert not (model_dir / "1" / "finalized").exists()
