import numpy as np

import triton_python_backend_utils as pb_utils

# What each MODE returns: (output name, array).
RETURNS = {
    "int64": ("OUT", np.array([1, 2, 3], np.int64)),
    "fp16": ("OUT", np.array([0.5, -1.0], np.float16)),
    "bool": ("OUT", np.array([True, False])),
    "bytes": ("OUT", np.array([b"a", b"bc"], np.object_)),
    "rank": ("OUT", np.arange(4, dtype=np.float32).reshape(2, 2)),
    "scalar": ("OUT", np.array(2.5, np.float32)),
    "fixed_shape": ("FIXED", np.array([1, 2, 3], np.int32)),
    "matching": ("OUT", np.array([1.5], np.float32)),
}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            via_sender = mode.startswith("send_")
            name, array = RETURNS[mode[len("send_") :] if via_sender else mode]
            response = pb_utils.InferenceResponse([pb_utils.Tensor(name, array)])
            if via_sender:  # the response sender's path, in default mode
                flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                request.get_response_sender().send(response, flags=flags)
                responses.append(None)
            else:
                responses.append(response)
        return responses
