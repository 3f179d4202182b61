import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            info = {
                "request_id": request.request_id(),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
            }
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", x.copy()),
                        pb_utils.Tensor("OUTPUT1", (x * 2).astype(np.float32)),
                        pb_utils.Tensor(
                            "PARAMS", np.array([request.parameters().encode()], np.object_)
                        ),
                        pb_utils.Tensor(
                            "REQUEST_INFO", np.array([json.dumps(info).encode()], np.object_)
                        ),
                    ]
                )
            )
        return responses
