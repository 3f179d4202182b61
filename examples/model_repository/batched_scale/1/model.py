"""Multiply every row by 2. Each request of a dynamic batch arrives as its own request."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            rows = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            scaled = (rows * np.float32(2)).astype(np.float32)
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", scaled)])
            )
        return responses
