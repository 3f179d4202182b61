"""``infer_batch``: several requests in one ``execute``, as the dynamic batcher hands them
over (in-process and in a stub process always one batch; through the server the batcher
decides). A request the server refuses gets its own error and the rest are answered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pybackend.testing import InferError, ModelHarness, ServerModel, StubModel
from pybackend.testing.harness_errors import DECOUPLED_ON_HTTP
from pybackend.utils.errors import ErrorCode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
KINDS = {"inprocess": ModelHarness, "stub": StubModel, "server": ServerModel}


@pytest.mark.parametrize("mode", list(KINDS))
def test_one_execute_for_the_batch(mode: str) -> None:
    rows = [np.full((1, 8), i, np.float32) for i in range(3)] + [np.ones((2, 8), np.float32)]
    refused = {"INPUT0": np.ones((1, 7), np.float32)}
    with KINDS[mode](EXAMPLES / "stacked_scale") as model:
        out = model.infer_batch([{"INPUT0": r} for r in rows] + [refused])
        alone = [model.infer({"INPUT0": r}) for r in rows]
    assert isinstance(out[-1], InferError)
    assert "unexpected shape for input 'INPUT0'" in out[-1].message
    for got, want in zip(out, alone):
        assert not isinstance(got, InferError), got
        # Exact on purpose: integer-valued rows, whose matmul sums are exact in float32 in
        # any order (tests/integration_support/floats.py for rows that are not).
        np.testing.assert_array_equal(got["OUTPUT0"], want["OUTPUT0"])
    if mode != "server":  # stacked_scale reports how many rows its execute computed
        assert [o["BATCH_ROWS"].reshape(-1).tolist() for o in out[:-1]] == [
            [5], [5], [5], [5, 5]
        ]  # fmt: skip


@pytest.mark.parametrize("mode", ["inprocess", "stub"])
def test_an_error_of_the_batch_reaches_every_request(mode: str) -> None:
    with KINDS[mode](EXAMPLES / "error_model") as model:
        out = model.infer_batch([{"INPUT0": np.ones(2, np.float32)}] * 2)
    assert all(isinstance(o, InferError) and "error_model refuses" in o.message for o in out)


@pytest.mark.parametrize("mode", list(KINDS))
def test_a_decoupled_model_is_refused(mode: str) -> None:
    # As tritonserver refuses infer() of a decoupled model (HTTP's 501): each request.
    with KINDS[mode](EXAMPLES / "token_stream") as model:
        out = model.infer_batch([{"PROMPT": np.array([b"a"], dtype=object)}] * 2)
    assert all(isinstance(o, InferError) for o in out), out
    for error in out:
        assert isinstance(error, InferError)
        assert error.code == ErrorCode.UNSUPPORTED
        assert error.message.startswith(DECOUPLED_ON_HTTP)
