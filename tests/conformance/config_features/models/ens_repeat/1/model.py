import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for value in pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().tolist():
                one = pb_utils.Tensor("ONE", np.array([value], np.object_))
                sender.send(pb_utils.InferenceResponse([one]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
