"""BLS pipeline step 1: count letters, digits, spaces and other characters of TEXT."""

import numpy as np

import triton_python_backend_utils as pb_utils


def features(text: str) -> np.ndarray:
    letters = sum(c.isalpha() for c in text)
    digits = sum(c.isdigit() for c in text)
    spaces = sum(c.isspace() for c in text)
    return np.array([letters, digits, spaces, len(text) - letters - digits - spaces], np.float32)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()[0]
            out = pb_utils.Tensor("FEATURES", features(text.decode("utf-8", "replace")))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
