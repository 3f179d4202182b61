import numpy as np

import triton_python_backend_utils as pb_utils

PARAMETERS = {"text": "hello", "number": 42, "negative": -7, "yes": True, "no": False}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            path = pb_utils.get_input_tensor_by_name(request, "PATH").as_numpy()[0]
            out = pb_utils.Tensor("OUT", np.array([1], np.int32))
            response = pb_utils.InferenceResponse([out], parameters=PARAMETERS)
            if path == b"sender":
                sender = request.get_response_sender()
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                responses.append(None)
            else:
                responses.append(response)
        return responses
