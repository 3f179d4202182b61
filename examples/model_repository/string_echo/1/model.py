"""Echo a BYTES tensor and return each element's bytes reversed (arbitrary bytes, NULs too)."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            # BYTES tensors arrive as numpy object arrays of Python bytes.
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            reversed_items = np.array([item[::-1] for item in data.ravel()], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", data),
                        pb_utils.Tensor("OUTPUT1", reversed_items.reshape(data.shape)),
                    ]
                )
            )
        return responses
