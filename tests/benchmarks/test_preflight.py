"""benchmarks/preflight.py, which the GPU machine's CPU benchmark runs before it: the original
backend serves, and its stub runs the wheel's own triton_python_backend_utils with numpy<2."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(180)
def test_preflight_reports_how_the_original_stub_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.preflight"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("original backend: READY; "), line
    numpy_version = re.search(r" numpy (\S+) ", line)
    assert numpy_version and numpy_version.group(1).startswith("1."), line
    # The wheel's own module, not ours at the repository root.
    assert f"{REPO}/triton_python_backend_utils.py" not in line
    assert "backends/python/triton_python_backend_utils.py" in line, line
