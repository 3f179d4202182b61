"""BLS pipeline step 3: name the largest score."""

import numpy as np

import triton_python_backend_utils as pb_utils

LABELS = ("letters", "digits", "spaces", "other")


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            scores = pb_utils.get_input_tensor_by_name(request, "SCORES").as_numpy()
            label = LABELS[int(np.argmax(scores))]
            out = pb_utils.Tensor("LABEL", np.array([label.encode()], np.object_))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
