"""OUT = a copy of IN (not a view: the output must travel through the stub's arena), or
GROW zero bytes; PID = the stub's pid."""

import os

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            grow = pb_utils.get_input_tensor_by_name(request, "GROW")
            if grow is not None:
                out = np.zeros(int(grow.as_numpy()[0]), dtype=np.uint8)
            else:
                out = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().copy()
            pid = np.array([os.getpid()], dtype=np.int64)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", out), pb_utils.Tensor("PID", pid)]
                )
            )
        return responses
