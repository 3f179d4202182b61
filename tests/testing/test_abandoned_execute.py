"""What an engine hands the abandoned-execute rules (abandoned_execute.py) that its own
tests cannot show: a StubModel's ``debug=`` lifts the bound of its calls as PYBACKEND_DEBUG
does (its modes need a terminal or an IDE attached, so a StubModel cannot be started with
one here)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from model_dirs import write_model

from pybackend.testing.abandoned_execute import AbandonedExecute
from pybackend.testing.harness_errors import InferError
from pybackend.testing.model_dir import ModelOnDisk


def _never_timed_out() -> InferError:
    raise AssertionError("the call was given up on")


@pytest.mark.parametrize("debug", ["", "pdb"])
def test_an_engines_debug_mode_runs_the_call_unbounded_on_the_callers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug: str
) -> None:
    monkeypatch.delenv("PYBACKEND_DEBUG", raising=False)
    disk = ModelOnDisk(write_model(tmp_path, "debuggee", ""))
    abandoned = AbandonedExecute(disk, "StubModel", lambda token: None, debug)
    deadline = time.monotonic() + 30.0
    ran_on = abandoned.bounded(
        lambda: threading.current_thread().name, 30.0, deadline, [7], _never_timed_out
    )
    # Unbounded, a breakpoint may hold the call for as long as the developer takes.
    assert ran_on == (threading.current_thread().name if debug else "harness-execute-debuggee-7")
