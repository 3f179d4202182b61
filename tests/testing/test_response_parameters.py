"""Response parameters (``InferenceResponse(parameters=...)``) reach the harness's caller in
``Outputs.parameters`` in every mode, as tritonserver's clients read them: from a returned
response, from the response sender, from each response of a stream and of a batch."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from pybackend.testing import ModelHarness, Outputs, ServerModel, StubModel

KINDS = {"inprocess": ModelHarness, "stub": StubModel, "server": ServerModel}
RESPONSE_PARAMS = (
    Path(__file__).resolve().parents[1]
    / "conformance"
    / "execute_semantics"
    / "models"
    / "response_params"
)
# A decoupled model that sends N responses, parameters on every other one.
STREAM_MODEL = Path(__file__).resolve().parents[1] / "models" / "param_stream"
# What response_params sets on every response.
EXPECTED = {"text": "hello", "number": 42, "negative": -7, "yes": True, "no": False}


@pytest.fixture
def response_params(tmp_path: Path) -> Path:
    return Path(shutil.copytree(RESPONSE_PARAMS, tmp_path / "response_params"))


def _path(which: str) -> Dict[str, Any]:
    return {"PATH": np.array([which.encode()], dtype=object)}


@pytest.mark.parametrize("mode", list(KINDS))
def test_parameters_of_a_returned_and_a_sent_response(mode: str, response_params: Path) -> None:
    with KINDS[mode](response_params) as model:
        for which in ("return", "sender"):
            out = model.infer(_path(which))
            assert isinstance(out, Outputs)
            assert out == {"OUT": np.array([1], np.int32)}
            assert out.parameters == EXPECTED
            assert {k: type(v) for k, v in out.parameters.items()} == {
                k: type(v) for k, v in EXPECTED.items()
            }


@pytest.mark.parametrize("mode", ["inprocess", "stub"])
def test_parameters_of_each_request_of_a_batch(mode: str, response_params: Path) -> None:
    with KINDS[mode](response_params) as model:
        answers = model.infer_batch([_path("return"), _path("sender")])
    assert [a.parameters for a in answers] == [EXPECTED, EXPECTED]


@pytest.mark.parametrize("mode", list(KINDS))
def test_parameters_of_each_streamed_response(mode: str, tmp_path: Path) -> None:
    stream_model = shutil.copytree(STREAM_MODEL, tmp_path / "param_stream")
    live: List[Outputs] = []
    with KINDS[mode](stream_model) as model:
        got = model.infer_stream({"N": np.array([3], np.int32)}, on_response=live.append)
    want = [{"index": 0, "last": False}, {}, {"index": 2, "last": True}]
    assert [int(o["OUT"][0]) for o in got] == [0, 1, 2]
    assert [o.parameters for o in got] == want
    assert [o.parameters for o in live] == want


@pytest.mark.parametrize("mode", list(KINDS))
def test_a_model_that_is_not_decoupled_streams_its_one_answer_once(
    mode: str, response_params: Path
) -> None:
    """Its sender's response (with FINAL) is the request's one answer, streamed or live:
    not counted twice (sent and returned), and not waited for as a stream's FINAL."""
    with KINDS[mode](response_params) as model:
        for which in ("return", "sender"):
            live: List[Outputs] = []
            streamed = model.infer_stream(_path(which), timeout=10)
            assert [o.parameters for o in streamed] == [EXPECTED]
            assert model.infer_stream(_path(which), timeout=10, on_response=live.append) == [
                {"OUT": np.array([1], np.int32)}
            ]
            assert [o.parameters for o in live] == [EXPECTED]
