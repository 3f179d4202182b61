"""Issue 29's first benchmark model: a heavy import at the top, 256 MiB of "weights" that
``initialize`` gets from ``pb_utils.shared`` (one copy per process: one per model under
PYBACKEND_INSTANCE_PROCESS "shared", one per instance under "own" and "fork"), and a few
256x256 float32 matmuls per request (numpy releases the GIL in them).

The weights are slabs of permutation matrices (slab k moves column i to i + k), so each
answer is checkable for free: IDX [k0, k1, ...] -> W[k0] @ W[k1] @ ..., whose row i has its
1 at column (i + sum(IDX)) % 256; PERM is that column per row. params.json (written next to
this file by benchmarks/instances_repo.py) says what to import and how large the array is.
"""

import importlib
import json
from pathlib import Path

import numpy as np

import triton_python_backend_utils as pb_utils

PARAMS = json.loads(Path(__file__).with_name("params.json").read_text())
for _name in PARAMS["heavy_import"]:
    importlib.import_module(_name)

N = 256


def build_weights():
    slabs = PARAMS["array_mib"] * 2**20 // (N * N * 4)
    weights = np.empty((slabs, N, N), np.float32)
    weights.fill(0.0)  # every page written: resident, as loaded weights are
    k = np.arange(slabs)[:, None]
    i = np.arange(N)[None, :]
    weights[k, i, (i + k) % N] = 1.0
    return weights


class TritonPythonModel:
    def initialize(self, args):
        self.weights = pb_utils.shared("weights", build_weights)

    def execute(self, requests):
        responses = []
        for request in requests:
            idx = pb_utils.get_input_tensor_by_name(request, "IDX").as_numpy()
            product = self.weights[idx[0]]
            for k in idx[1:]:
                product = product @ self.weights[k]
            perm = product.argmax(axis=1).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PERM", perm)]))
        return responses
