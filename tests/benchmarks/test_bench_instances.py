"""The instances benchmark's quick mode (issue 29) still runs end to end: every model under
every mode loads, serves, answers right (the benchmark checks each answer) and gets a row.

No timing or memory goal is asserted: those are the benchmark's own target table, read on a
quiet machine (benchmarks/RESULTS.md), not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODES = ("own", "shared", "fork")


@pytest.mark.timeout(600)
def test_quick_mode_measures_every_model_and_mode(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.instances", "--quick", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert set(results["models"]) == {"init", "import"}
    for key, rows in results["models"].items():
        assert set(rows) == set(MODES), key
        for mode, row in rows.items():
            assert "error" not in row, (key, mode, row)
            assert row["completed"] > 0 and row["wrong"] == 0, (key, mode, row)
            assert row["memory_after"]["stubs_pss"] > 0, (key, mode, row)
            assert len(row["load_s"]) == 1, (key, mode, row)
    # The mode is what the model's config asked for: one process under "shared", one per
    # instance under "own" (the quick mode runs 2 instances).
    assert results["models"]["init"]["shared"]["memory_after"]["processes"] == 1
    assert results["models"]["init"]["own"]["memory_after"]["processes"] == 2
    assert "| target (issue 29) |" in done.stdout
