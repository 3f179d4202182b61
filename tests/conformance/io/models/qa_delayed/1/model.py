import time

import triton_python_backend_utils as pb_utils

# A slow import (heavy libraries, downloads): the load waits for it.
time.sleep(2)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return responses
