"""``infer_stream(on_response=...)`` hands each response on as the model sends it, in all
three modes; and a request for an output the config does not declare is refused in the
server's words in all three."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

from pybackend.testing import InferError, ModelHarness, ServerModel, StubModel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
KINDS = {"inprocess": ModelHarness, "stub": StubModel, "server": ServerModel}


@pytest.mark.parametrize("mode", list(KINDS))
def test_responses_arrive_while_the_model_still_generates(mode: str) -> None:
    """token_stream sleeps 20 ms between tokens: the first one is handed on well before
    infer_stream returns, each as it came, the same ones it returns."""
    seen: List[Tuple[float, Dict[str, np.ndarray]]] = []
    with KINDS[mode](EXAMPLES / "token_stream") as model:
        prompt = np.array([b"one two three four five six"], dtype=object)
        out = model.infer_stream(
            {"PROMPT": prompt}, on_response=lambda o: seen.append((time.monotonic(), o))
        )
        returned = time.monotonic()
    assert [o["INDEX"].tolist() for _, o in seen] == [o["INDEX"].tolist() for o in out]
    assert len(out) == 6
    assert returned - seen[0][0] >= 0.06  # five more tokens, >= 100 ms, came after it


@pytest.mark.parametrize("mode", list(KINDS))
def test_a_model_with_one_response_hands_that_one_on(mode: str) -> None:
    seen: List[Any] = []
    a = np.ones(4, np.float32)
    with KINDS[mode](EXAMPLES / "add_sub") as model:
        out = model.infer_stream({"INPUT0": a, "INPUT1": a}, on_response=seen.append)
    assert len(seen) == 1 and seen[0]["OUTPUT0"].tolist() == out[0]["OUTPUT0"].tolist()


@pytest.mark.parametrize("mode", list(KINDS))
def test_an_undeclared_output_is_refused(mode: str) -> None:
    a = np.ones(4, np.float32)
    with KINDS[mode](EXAMPLES / "add_sub") as model:
        with pytest.raises(InferError) as e:
            model.infer({"INPUT0": a, "INPUT1": a}, requested_outputs=["NOPE"])
    assert "unexpected inference output 'NOPE' for model 'add_sub'" in e.value.message


@pytest.mark.parametrize("mode", list(KINDS))
def test_cancel_event_cancels_while_the_model_streams(mode: str) -> None:
    """The test's own moment: set from on_response after the first token, the model's
    is_cancelled() turns true and token_stream stops early (20 tokens were asked for)."""
    cancel = threading.Event()
    with KINDS[mode](EXAMPLES / "token_stream") as model:
        prompt = np.array([b" ".join([b"w"] * 20)], dtype=object)
        out = model.infer_stream(
            {"PROMPT": prompt}, on_response=lambda _: cancel.set(), cancel_event=cancel
        )
    assert 1 <= len(out) < 20
