"""Can the ORIGINAL backend serve here, and how does its stub run? Checked before a benchmark
on a machine set up by hand (scripts/gpu_cpu_bench.sh on the GPU machine), so a report says
why the original is missing instead of a row of "n/a", and shows that the original's stub
runs its own triton_python_backend_utils with numpy<2 (not ours, not the machine's numpy).

    python -m benchmarks.preflight     # exit 0: it serves; 1: it does not (its log printed)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmarks.server import BenchServer, ServerFailed
from pybackend.server import locate

MODEL = "preflight"
CONFIG = f"""name: "{MODEL}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""
# The stub's output goes to the server's log: one line with what it runs.
MODEL_PY = """import sys
import numpy
import triton_python_backend_utils as pb_utils

print("PREFLIGHT stub: python", sys.version.split()[0], "numpy", numpy.__version__,
      "from", numpy.__file__, "| pb_utils", pb_utils.__file__, "| isolated", sys.flags.isolated,
      "| prefix", sys.prefix, flush=True)


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]
"""
# It is READY in about 2 s on a loaded 2-core machine; a stub that dies at once leaves the
# original waiting for it with the model LOADING, so the wait is short.
WAIT_S = 30.0


def main() -> int:
    try:
        backend_dir = locate.original_backend_dir()
    except (FileNotFoundError, ValueError) as exc:
        print(f"the original backend is not here: {exc}")
        return 1
    with tempfile.TemporaryDirectory(prefix="pybackend-preflight-") as tmp:
        repo = Path(tmp) / "repo"
        (repo / MODEL / "1").mkdir(parents=True)
        (repo / MODEL / "config.pbtxt").write_text(CONFIG)
        (repo / MODEL / "1" / "model.py").write_text(MODEL_PY)
        # Not strict: the server is up at once and a model that fails says so at once.
        server = BenchServer("original", repo, backend_dir, strict=False)
        try:
            try:
                server.start(timeout=WAIT_S)
                problem = server.wait_models([MODEL], WAIT_S)[MODEL]
            except ServerFailed as exc:
                problem = str(exc).splitlines()[0]
            log = server.log_tail(80)
            if problem:
                print(f"the original backend cannot serve here: {problem}")
                print(f"--- its server log:\n{log}")
                return 1
            stub_lines = [line for line in log.splitlines() if "PREFLIGHT stub:" in line]
            print("original backend: READY; " + (stub_lines[0] if stub_lines else "(no stub line)"))
            return 0
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
