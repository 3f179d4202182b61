import triton_python_backend_utils as pb_utils

from .helpers import scale
from .helpers.offsets import OFFSET


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            out = pb_utils.Tensor("OUT", scale.twice(data) + OFFSET)
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
