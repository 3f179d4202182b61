"""A decoupled model that sends N responses, parameters on every other one (response
parameters through the harness and the development server)."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            sender = request.get_response_sender()
            for i in range(n):
                out = pb_utils.Tensor("OUT", np.array([i], np.int32))
                # Parameters on every other response only: the others carry none.
                params = {"index": i, "last": i == n - 1} if i % 2 == 0 else None
                sender.send(pb_utils.InferenceResponse([out], parameters=params))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
