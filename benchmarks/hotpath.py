"""The stub's own Python work per request, in-process, without a server or a second process:
``Dispatcher.execute`` from an EXECUTE body to its RESULT (decoding the requests, the model's
``execute``, placing the outputs, encoding RESULT). A round trip through tritonserver adds the
wake-ups, the backend and Triton to this; where a spin removes the wake-ups (issue 31 part 2)
this is most of what is left on the stub's side.

    python -m benchmarks.hotpath                        # this checkout
    python -m benchmarks.hotpath --against ../base      # another checkout too, interleaved
    python -m benchmarks.hotpath --idle-us 300          # also: each call after 300 µs asleep

Each checkout runs in a fresh interpreter per round (``--rounds``, interleaved A, B, A, B...),
with the same model files (benchmarks/models); a case's number is its best time per call over
every repeat of every round: this machine has slow spells, and the best is what the code
costs. Pinning to one CPU (``taskset -c 1``) makes the rounds agree better.

Through a server a call seldom finds the CPU as warm as back-to-back calls leave it: between
requests the stub sleeps (unless the spin keeps it polling), and on a VM an idle vCPU comes
back slower (caches, predictors, the host's own work). ``--idle-us N`` adds, per case, the
median of single calls each made after sleeping N µs, so the two can be compared on the same
machine (the stub's turn in the server is ``benchmarks.gpu_identity --breakdown``'s
``execute.total``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

MODELS = Path(__file__).resolve().parent / "models"
HERE = Path(__file__).resolve().parent.parent

# (case, model file, input names, output names, requests per EXECUTE): FP32 [1, 16] inputs
# inline in the message, as tritonserver sends the tiny rows of benchmarks.run.
CASES = [
    ("identity x1", "identity.py", ["INPUT0"], ["OUTPUT0"], 1),
    ("add_sub x1", "add_sub.py", ["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"], 1),
    ("identity x8", "identity.py", ["INPUT0"], ["OUTPUT0"], 8),
]

# Run by a fresh interpreter with the checkout's directory first on sys.path (argv: the
# checkout, the models' directory, calls per repeat, repeats, µs asleep before each single
# call of the idle measure, 0 for none). Prints {case: µs per call}.
_CHILD = r"""
import importlib.util, json, socket, sys, time, timeit
repo, models, number, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
idle_us = int(sys.argv[5])
sys.path.insert(0, repo)
import numpy as np
import pybackend.utils as pb_utils
sys.modules["triton_python_backend_utils"] = pb_utils
from pybackend.ipc import codec
from pybackend.ipc.codec import RequestDesc, TensorDesc
from pybackend.ipc.protocol import Location
from pybackend.stub.dispatch import Dispatcher
from pybackend.stub.state import StubState
from pybackend.utils.dtypes import TYPE_FP32

sync, sync_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
async_, async_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
state = StubState(sync.detach(), async_.detach(), "bench_0")
state.make_arena(1 << 20, 1 << 20)
data = memoryview(np.arange(16, dtype=np.float32).tobytes())
config = json.dumps({"output": [{"name": n, "data_type": "TYPE_FP32", "dims": [16]}
                                for n in ("OUTPUT0", "OUTPUT1")]})

def model(file):
    spec = importlib.util.spec_from_file_location("bench_model", f"{models}/{file}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    m = module.TritonPythonModel()
    if hasattr(m, "initialize"):
        m.initialize({"model_config": config})
    return m

out = {}
for case, file, inputs, outputs, n in json.loads(sys.stdin.read()):
    requests = [
        RequestDesc(
            1 + i,
            requested_outputs=outputs,
            inputs=[TensorDesc(x, TYPE_FP32, Location.INLINE, (1, 16), 64, data=data)
                    for x in inputs],
        )
        for i in range(n)
    ]
    body = memoryview(bytes(codec.encode_execute(requests)))
    dispatcher = Dispatcher(state, model(file), "bench_0", "model.py", decoupled=False)
    result = codec.decode_result(dispatcher.execute(body))
    assert result.error is None and len(result.items) == n, result
    call = lambda: dispatcher.execute(body)
    timeit.timeit(call, number=number)  # warm-up
    out[case] = min(timeit.repeat(call, number=number, repeat=repeat)) / number * 1e6
    if idle_us > 0:
        single = []
        for _ in range(max(21, min(number, 500))):
            time.sleep(idle_us / 1e6)
            t0 = time.perf_counter_ns()
            call()
            single.append(time.perf_counter_ns() - t0)
        single.sort()
        out[f"{case} after {idle_us} µs idle"] = single[len(single) // 2] / 1000
print(json.dumps(out))
"""


def measure(checkout: Path, number: int, repeat: int, idle_us: int = 0) -> Dict[str, float]:
    """One round of every case in a fresh interpreter over ``checkout``'s pybackend (and,
    with ``idle_us``, each case's single calls after that long asleep)."""
    argv = [str(checkout), str(MODELS), str(number), str(repeat), str(idle_us)]
    got = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        input=json.dumps(CASES),
        capture_output=True,
        text=True,
        cwd="/",  # nothing of this checkout on sys.path but what the child puts there
        check=False,
        timeout=600,
    )
    if got.returncode != 0:
        raise RuntimeError(f"the hot path benchmark failed over {checkout}:\n{got.stderr}")
    return json.loads(got.stdout)


def run(
    checkouts: List[Path], rounds: int, number: int, repeat: int, idle_us: int = 0
) -> Dict[str, list]:
    """{case: [best µs per call of each checkout]}, the checkouts' rounds interleaved."""
    best: Dict[str, list] = {}
    for _ in range(rounds):
        for i, checkout in enumerate(checkouts):
            for case, us in measure(checkout, number, repeat, idle_us).items():
                row = best.setdefault(case, [float("inf")] * len(checkouts))
                row[i] = min(row[i], us)
    return best


def table(checkouts: List[Path], best: Dict[str, list]) -> str:
    head = ["case"] + [f"{c} µs/call" for c in checkouts]
    if len(checkouts) == 2:
        head.append("second/first")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" + "--:|" * (len(head) - 1)]
    for case, values in best.items():
        cells = [case] + [f"{v:.2f}" for v in values]
        if len(checkouts) == 2:
            cells.append(f"{values[1] / values[0]:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: List[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.hotpath",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--against", type=Path, help="another checkout, measured first")
    p.add_argument("--rounds", type=int, default=3, help="fresh interpreters per checkout")
    p.add_argument("--number", type=int, default=5000, help="calls per repeat")
    p.add_argument("--repeat", type=int, default=7, help="repeats per round")
    p.add_argument(
        "--idle-us",
        type=int,
        default=0,
        help="also time single calls, each after sleeping this long (median; 0: not)",
    )
    args = p.parse_args(argv)
    checkouts = [args.against.resolve(), HERE] if args.against else [HERE]
    best = run(checkouts, args.rounds, args.number, args.repeat, args.idle_us)
    print(table(checkouts, best))


if __name__ == "__main__":
    main()
