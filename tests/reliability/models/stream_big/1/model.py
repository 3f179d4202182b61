"""N[0] responses of N[1] bytes, sent from execute without pause (see config.pbtxt)."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
            count, size = int(n[0]), int(n[1])
            sender = request.get_response_sender()
            for i in range(count):
                out = np.full(size, i % 256, dtype=np.uint8)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
