"""Issue 29's second benchmark model: the same work as instances_shared.py, but the 256 MiB
of weights are built at import time, at module level, as many model.py files load theirs:
one copy per process that imports the module (per instance under "own", one under "shared",
one in the parent under "fork", shared copy-on-write with the children).
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


WEIGHTS = build_weights()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            idx = pb_utils.get_input_tensor_by_name(request, "IDX").as_numpy()
            product = WEIGHTS[idx[0]]
            for k in idx[1:]:
                product = product @ WEIGHTS[k]
            perm = product.argmax(axis=1).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PERM", perm)]))
        return responses
