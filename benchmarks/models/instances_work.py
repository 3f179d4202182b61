"""What both of issue 29's benchmark models (instances_shared.py, instances_import.py) do,
written once: the heavy import, the weights, and the work per request. Copied next to each
model.py by benchmarks/instances_repo.py, with the params.json it reads, and imported by the
model as a sibling (``from .instances_work import ...``: model.py is imported as
``<version>.model``, a namespace package, by both backends).

The weights are slabs of permutation matrices (slab k moves column i to i + k), so each
answer is checkable for free: IDX [k0, k1, ...] -> W[k0] @ W[k1] @ ..., whose row i has its
1 at column (i + sum(IDX)) % 256; PERM is that column per row. params.json says what to
import and how large the array is.
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


def execute(weights, requests):
    """A few 256x256 float32 matmuls per request (numpy releases the GIL in them)."""
    responses = []
    for request in requests:
        idx = pb_utils.get_input_tensor_by_name(request, "IDX").as_numpy()
        product = weights[idx[0]]
        for k in idx[1:]:
            product = product @ weights[k]
        perm = product.argmax(axis=1).astype(np.int32)
        responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PERM", perm)]))
    return responses
