"""The benchmark's quick mode still runs end to end and produces every row.

No timing is asserted anywhere: the numbers are checked by the benchmark's own target
table, on a quiet machine, not by the test suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ("original", "ours", "native")


@pytest.mark.timeout(600)
def test_quick_mode_produces_every_row(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks.workloads import WORKLOADS
    finally:
        sys.path.remove(str(REPO))
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    for workload in WORKLOADS:
        entry = results["workloads"][workload.key]
        for backend in BACKENDS:
            row = entry[backend]
            assert "na" in row or row["completed"] > 0, (workload.key, backend, row)
            assert f"| {workload.title} | {backend} |" in done.stdout
    assert set(results["load_time"]) == set(BACKENDS)
    for backend, memory in results["memory"].items():
        assert {"idle", "post_burst"} <= set(memory), backend
    assert results["targets"], "the target table is empty"
