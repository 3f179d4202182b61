import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            array = tensor.as_numpy()
            batch = array.shape[0]
            shape = np.tile(np.array(tensor.shape(), dtype=np.int64), (batch, 1))
            outputs = [pb_utils.Tensor("OUT", array), pb_utils.Tensor("SHAPE", shape)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
