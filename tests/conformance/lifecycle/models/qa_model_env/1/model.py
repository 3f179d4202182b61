import os

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.at_initialize = os.environ.get("MY_ENV", "<unset>")

    def execute(self, requests):
        responses = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "NAME").as_numpy()[0].decode()
            seen = f"{self.at_initialize}|{os.environ.get(name, '<unset>')}"
            value = np.array([seen.encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("VALUE", value)]))
        return responses
