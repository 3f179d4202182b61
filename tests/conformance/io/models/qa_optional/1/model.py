import numpy as np

import triton_python_backend_utils as pb_utils


def value_or_five(request, name):
    """A missing optional input counts as [5]."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return np.array([5], dtype=np.int32) if tensor is None else tensor.as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            first, second = value_or_five(request, "INPUT0"), value_or_five(request, "INPUT1")
            outputs = [
                pb_utils.Tensor("OUTPUT0", first + second),
                pb_utils.Tensor("OUTPUT1", first - second),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
