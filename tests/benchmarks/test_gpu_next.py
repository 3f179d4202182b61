"""scripts/gpu_next.sh, the next device session's first call: each part runs the GPU check
with its own settings and budget, is packed into OUTDIR/<part>.tar.gz, and a part whose
budget no longer fits is skipped, so the call ends inside the device tool's limit. A recorder
stands in for scripts/gpu_check.sh (the real one needs the GPU machine's kit)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Writes what a part's check was given into its folder, as gpu_check.sh writes summary.txt.
RECORDER = """#!/usr/bin/env bash
mkdir -p "$1"
for v in GPU_CHECK_BUDGET GPU_BREAKDOWN GPU_SPIN_AB GPU_SPIN_AB_SIDES GPU_CPU_BENCH_CAP \\
         PYTEST_ARGS GPU_CHECK_REVISION; do
    echo "$v=${!v-unset}" >>"$1/summary.txt"
done
"""


def _run(tmp: Path, parts: str, budget: int) -> tuple[str, Path]:
    recorder = tmp / "check.sh"
    recorder.write_text(RECORDER)
    out = tmp / "out"
    env = {
        **os.environ,
        "GPU_CHECK_SCRIPT": str(recorder),
        "GPU_NEXT_BUDGET": str(budget),
        "GPU_CHECK_REVISION": "abc1234",
    }
    got = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_next.sh"), str(out), parts],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return got.stdout, out


def _summary(out: Path, part: str) -> dict[str, str]:
    with tarfile.open(out / f"{part}.tar.gz") as tar:
        member = tar.extractfile(f"{part}/summary.txt")
        assert member is not None
        text = member.read().decode()
    return dict(line.split("=", 1) for line in text.splitlines())


def test_each_part_runs_the_check_with_its_settings_and_is_packed(tmp_path: Path) -> None:
    stdout, out = _run(tmp_path, "a b c", budget=600)
    assert sorted(p.name for p in out.iterdir()) == ["a.tar.gz", "b.tar.gz", "c.tar.gz", "next.txt"]
    a, b, c = (_summary(out, p) for p in "abc")
    assert a["PYTEST_ARGS"] == "-k shared_instances" and a["GPU_CPU_BENCH_CAP"] == "0"
    assert b["GPU_BREAKDOWN"] == "only" and b["GPU_CHECK_BUDGET"] == "300"
    assert c["GPU_SPIN_AB"] == "only" and c["GPU_SPIN_AB_SIDES"] == "auto,off"
    assert {a["GPU_CHECK_REVISION"], b["GPU_CHECK_REVISION"], c["GPU_CHECK_REVISION"]} == {
        "abc1234"
    }
    # The summaries come back in the output the device tool shows.
    for part in "abc":
        assert f"===== part {part}: summary.txt" in stdout
        assert f"gpu_next: part {part} rc=0" in stdout


def test_a_part_gets_what_is_left_or_is_skipped_below_its_minimum(tmp_path: Path) -> None:
    # 150 s: part b (300, at least 200) is skipped, part c (170, at least 120) runs with
    # what is left.
    stdout, out = _run(tmp_path, "b c a", budget=150)
    assert not (out / "b.tar.gz").exists()
    assert "part b skipped: needs at least 200s, 15" in stdout
    assert 120 <= int(_summary(out, "c")["GPU_CHECK_BUDGET"]) <= 150
    # The recorder takes no time: after c, 150 s are still left and a gets its own 110.
    assert _summary(out, "a")["GPU_CHECK_BUDGET"] == "110"


def test_an_unknown_part_is_named_and_the_others_run(tmp_path: Path) -> None:
    stdout, out = _run(tmp_path, "c z", budget=600)
    assert "unknown part 'z'" in stdout
    assert (out / "c.tar.gz").is_file()
