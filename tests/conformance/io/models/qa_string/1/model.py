import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The input back, cast to numpy 'S' on odd calls and to object on even ones, so both
    array forms of BYTES outputs are sent."""

    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            form = np.bytes_ if self.calls % 2 == 0 else np.object_
            self.calls += 1
            out = pb_utils.Tensor("OUTPUT0", data.astype(form))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
