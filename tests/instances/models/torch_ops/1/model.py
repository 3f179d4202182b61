"""A model.py that imports torch at module level and builds its weights there, as torch
models do (tests/instances/test_torch_instances.py). OP (INT32 [1]) is ignored; OUT (STRING
[1]) is a JSON answer: who served, what torch computed, CUDA and thread state.

Parameter TORCH_THREADS (optional): initialize calls torch.set_num_threads with it plus the
instance's index, so that under `shared` the instances ask for different counts."""

import json
import os
import threading

import numpy as np
import torch

import triton_python_backend_utils as pb_utils

# One line per import of this module, with the importing pid (fork: imported once).
with open(os.path.join(os.path.dirname(__file__), "imports.log"), "a") as _f:
    _f.write(f"{os.getpid()}\n")

# Weights built and used at import, before any fork: torch's intra-op threads run here.
torch.manual_seed(0)
WEIGHTS = torch.randn(256, 256)
WARM = float((WEIGHTS @ WEIGHTS).sum())


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        params = json.loads(args["model_config"]).get("parameters", {})
        base = params.get("TORCH_THREADS", {}).get("string_value", "")
        if base:
            torch.set_num_threads(int(base) + int(self.name.rsplit("_", 1)[1]))

    def execute(self, requests):
        out = []
        for _ in requests:
            with torch.no_grad():
                product = WEIGHTS @ WEIGHTS  # parallel on the intra-op threads
            answer = {
                "instance": self.name,
                "pid": os.getpid(),
                "thread": threading.get_ident(),
                "sum": float(product.sum()),
                "warm": WARM,
                "cuda_initialized": torch.cuda.is_initialized(),
                "num_threads": torch.get_num_threads(),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            }
            text = np.array([json.dumps(answer)], dtype=np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]))
        return out
