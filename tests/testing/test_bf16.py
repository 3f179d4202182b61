"""BF16 through the harness in all three modes (UV-39): an ml_dtypes.bfloat16 input is
taken as BF16 by the input checks and a BF16 output comes back as ml_dtypes.bfloat16, the
same bits as through the server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pybackend.testing import ModelHarness, ServerModel, StubModel

ml_dtypes = pytest.importorskip("ml_dtypes", reason="BF16 arrays need ml_dtypes (in .venv)")

MODEL = Path(__file__).resolve().parents[1] / "conformance" / "io" / "models" / "bf16_identity"
KINDS = {"inprocess": ModelHarness, "stub": StubModel, "server": ServerModel}


@pytest.mark.parametrize("mode", list(KINDS))
def test_bf16_in_and_out(mode: str) -> None:
    values = np.array([1.0, -2.0, 0.5], dtype=ml_dtypes.bfloat16)
    with KINDS[mode](MODEL) as model:
        out = model.infer({"IN": values}, requested_outputs=["OUT"])["OUT"]
    assert out.dtype == values.dtype
    assert out.view(np.uint16).tolist() == values.view(np.uint16).tolist()
