import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for index, request in enumerate(requests):
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            position = np.array([[len(requests), index]] * data.shape[0], np.int32)
            outputs = [pb_utils.Tensor("OUT", data), pb_utils.Tensor("POSITION", position)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
