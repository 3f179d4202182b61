"""OUT = IN * 2; INFO = this request's input shape and the shapes of its whole batch."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() for r in requests]
        shapes = sorted(list(a.shape) for a in arrays)
        responses = []
        for array in arrays:
            info = json.dumps({"shape": list(array.shape), "batch": shapes}).encode()
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", array * 2),
                        pb_utils.Tensor("INFO", np.array([[info]] * array.shape[0], np.object_)),
                    ]
                )
            )
        return responses
