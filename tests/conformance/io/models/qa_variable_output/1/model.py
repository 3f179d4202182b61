import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            # INPUT holds n: the answer has n elements, all equal to n.
            n = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0, 0])
            output = np.ones(n, dtype=np.float32) * n
            batch = np.array([[len(requests)]], dtype=np.int32)
            tensors = [pb_utils.Tensor("OUTPUT", output), pb_utils.Tensor("BATCH", batch)]
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
