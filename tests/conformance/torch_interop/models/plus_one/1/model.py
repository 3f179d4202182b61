import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            out = pb_utils.Tensor("OUTPUT", (values + np.float32(1)).astype(np.float32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
