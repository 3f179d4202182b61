import numpy as np

import triton_python_backend_utils as pb_utils

RESHAPED = [10, 2, 6, 5, 11]
AXES = [1, 0, 4, 2, 3]


class TritonPythonModel:
    """Outputs that are numpy views: a reshape, and two transposes (not C-contiguous)."""

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            outputs = [
                pb_utils.Tensor("OUTPUT0", data.reshape(RESHAPED)),
                pb_utils.Tensor("OUTPUT1", data.T),
                pb_utils.Tensor("OUTPUT2", np.transpose(data, AXES)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
