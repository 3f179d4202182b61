"""SUM = A (+ B when sent); INFO tells what this request and its batch looked like."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        batch = [sorted(t.name() for t in request.inputs()) for request in requests]
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B")
            total = a if b is None else a + b.as_numpy()
            info = {
                "b": "None" if b is None else [list(b.shape()), b.as_numpy().tolist()],
                "a_shape": list(a.shape),
                "batch": batch,
            }
            text = np.array([[json.dumps(info).encode()]] * a.shape[0], np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("SUM", total), pb_utils.Tensor("INFO", text)]
                )
            )
        return responses
