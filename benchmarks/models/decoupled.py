"""Decoupled streaming: INPUT0 = n; send n responses (OUTPUT0 = i), then the final flag."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()[0])
            for i in range(count):
                output = pb_utils.Tensor("OUTPUT0", np.array([i], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[output]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
