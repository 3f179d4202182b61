"""Issue 29's first benchmark model: a heavy import at the top, 256 MiB of "weights" that
``initialize`` gets from ``pb_utils.shared`` (one copy per process: one per model under
PYBACKEND_INSTANCE_PROCESS "shared", one per instance under "own" and "fork"), and a few
256x256 float32 matmuls per request. The import, the weights and the work are
instances_work.py's (copied next to this file by benchmarks/instances_repo.py).
"""

import triton_python_backend_utils as pb_utils

from .instances_work import build_weights, execute


class TritonPythonModel:
    def initialize(self, args):
        self.weights = pb_utils.shared("weights", build_weights)

    def execute(self, requests):
        return execute(self.weights, requests)
