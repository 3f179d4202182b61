"""Decode a BYTES tensor into Python objects and report how many strings arrived."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            strings = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            count = np.array([strings.size], dtype=np.int64)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", count)]))
        return responses
