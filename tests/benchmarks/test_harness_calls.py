"""benchmarks/harness_calls.py runs end to end and gives both engines' rows (no timing is
asserted: the numbers go to benchmarks/RESULTS.md from a quiet machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_both_engines_are_measured() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.harness_calls", "--calls", "20", "--rounds", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "µs" not in line]
    assert [row.split("|")[1].strip() for row in rows] == ["ModelHarness", "StubModel"]
    for row in rows:
        assert float(row.split("|")[2]) > 0
