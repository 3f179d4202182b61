import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.executed = 0

    def execute(self, requests):
        self.executed += len(requests)  # warmup's request counts: the first client sees it
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = (x + self.executed).astype(np.int64)  # INT64 where the config says FP32
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
        return responses
