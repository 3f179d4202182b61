"""benchmarks/spin_ab.py's sides (the numbers themselves are measured on the GPU machine's
16 cores: scripts/gpu_cpu_bench.sh)."""

from __future__ import annotations

import pytest

from benchmarks import spin_ab


@pytest.mark.parametrize(
    ("side", "config"),
    [
        ("auto", ""),
        ("off", "ipc-spin-us=0"),
        ("300", "ipc-spin-us=300"),
        ("0", "ipc-spin-us=0"),
        ("auto/off", "ipc-bls-spin-us=0"),
        ("100/2000", "ipc-spin-us=100,ipc-bls-spin-us=2000"),
        ("off/auto", "ipc-spin-us=0"),
    ],
)
def test_a_side_is_the_backend_config_of_our_server(side: str, config: str) -> None:
    assert spin_ab.side_config(side) == config


def test_a_bad_side_is_refused_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def never() -> str:
        raise AssertionError("a server was started")

    monkeypatch.setattr(spin_ab, "decision", never)
    with pytest.raises(ValueError, match="auto, off or a number"):
        spin_ab.main(["--sides", "auto,soon"])
