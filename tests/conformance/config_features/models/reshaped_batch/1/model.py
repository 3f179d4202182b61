"""OUT = IN + 1 in the shape the model was given; INFO = that shape and the config's dims."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            array = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            info = json.dumps({"shape": list(array.shape)}).encode()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", array + 1),
                        pb_utils.Tensor("INFO", np.array([[info]] * array.shape[0], np.object_)),
                    ]
                )
            )
        return responses
