"""What one call costs in the offline engines (docs/testing.md): ``infer`` of the add_sub
example through ModelHarness (in-process) and StubModel (a stub process), per call, best of
several windows. No server: a developer's pytest run pays this for every call it makes.

    .venv/bin/python -m benchmarks.harness_calls [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Dict

import numpy as np

from pybackend.testing import ModelHarness, StubModel

ADD_SUB = Path(__file__).resolve().parents[1] / "examples" / "model_repository" / "add_sub"
ENGINES: Dict[str, Any] = {"ModelHarness": ModelHarness, "StubModel": StubModel}


def measure(calls: int = 2000, rounds: int = 5) -> Dict[str, float]:
    """µs per ``infer`` for each engine: the best window of ``rounds`` of ``calls`` calls
    (this machine has slow spells; the best window is the engine's own cost)."""
    x = np.ones(4, np.float32)
    inputs = {"INPUT0": x, "INPUT1": x}
    out: Dict[str, float] = {}
    for name, engine in ENGINES.items():
        with engine(ADD_SUB) as model:
            for _ in range(min(calls, 200)):  # warm: imports, first allocations
                model.infer(inputs)
            best = float("inf")
            for _ in range(rounds):
                start = time.perf_counter()
                for _ in range(calls):
                    model.infer(inputs)
                best = min(best, (time.perf_counter() - start) / calls)
            out[name] = best * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| engine | µs per infer (add_sub, best window) |")
    print("|---|--:|")
    for name, us in measure(args.calls, args.rounds).items():
        print(f"| {name} | {us:.0f} |")


if __name__ == "__main__":
    main()
