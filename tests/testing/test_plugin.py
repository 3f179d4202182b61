"""The pytest plugin: ``triton_model`` and ``--pybackend-mode`` in a user's own test run
(pytester runs a fresh pytest in a temporary directory with the installed entry point)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2] / "examples" / "model_repository"

USER_TEST = f"""
import numpy as np

def test_add_sub(triton_model, pybackend_mode):
    model = triton_model({str(REPO / "add_sub")!r})
    a = np.ones(4, np.float32)
    assert model.infer({{"INPUT0": a, "INPUT1": a}})["OUTPUT0"].tolist() == [2, 2, 2, 2]
    print("MODE", pybackend_mode, type(model).__name__)
"""


def test_default_mode_is_in_process(pytester: Any) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*MODE inprocess ModelHarness*"])


def test_every_mode_runs_the_same_test(pytester: Any) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-s", "--pybackend-mode=inprocess,stub,server")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*MODE inprocess ModelHarness*",
            "*MODE stub StubModel*",
            "*MODE server ServerModel*",
        ]
    )


def test_unknown_mode_is_a_usage_error(pytester: Any) -> None:
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("--pybackend-mode=docker")
    result.stderr.fnmatch_lines(["ERROR: --pybackend-mode: unknown *docker*choose from*"])
