import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            path = pb_utils.get_input_tensor_by_name(request, "PATH").as_numpy()[0]
            requested = request.requested_output_names()
            seen = sorted(requested) + [type(requested).__name__]
            response = pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor("A", np.array([1], np.int32)),
                    pb_utils.Tensor("B", np.array([2], np.int32)),
                    pb_utils.Tensor("C", np.array([s.encode() for s in seen], dtype=object)),
                ]
            )
            if path == b"sender":
                sender = request.get_response_sender()
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                responses.append(None)
            else:
                responses.append(response)
        return responses
