import os

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The server's environment reaches the model: the load fails without MY_ENV, and
    execute answers the value of the variable NAME (empty if unset)."""

    def initialize(self, args):
        if os.environ.get("MY_ENV") != "MY_ENV":
            raise pb_utils.TritonModelException("MY_ENV is missing or has a wrong value")

    def execute(self, requests):
        responses = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "NAME").as_numpy()[0].decode()
            value = np.array([os.environ.get(name, "").encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("VALUE", value)]))
        return responses
