"""INPUT0 back as OUTPUT0 (NVIDIA qa `restart`'s model), and FREE, the stub's free shared
memory (c_python_backend_utils, as the qa model reads it) when execute began. While the file
named by $RESTART_HANG_INIT_WHILE exists, initialize hangs (a restart that never comes up)."""

import os
import time

import c_python_backend_utils as c_utils
import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        flag = os.environ.get("RESTART_HANG_INIT_WHILE", "")
        while flag and os.path.exists(flag):
            time.sleep(0.05)

    def execute(self, requests):
        free = c_utils.shared_memory.free_memory()
        responses = []
        for r in requests:
            data = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            free_out = np.full((data.shape[0], 1), free, dtype=np.int64)
            outputs = [pb_utils.Tensor("OUTPUT0", data), pb_utils.Tensor("FREE", free_out)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
