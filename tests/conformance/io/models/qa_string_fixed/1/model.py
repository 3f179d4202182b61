import numpy as np

import triton_python_backend_utils as pb_utils

# Call by call: a fixed string, then an empty output, as numpy 'S' then as object.
ANSWERS = (
    np.array(["123456"], dtype=np.bytes_),
    np.array([], dtype=np.bytes_),
    np.array(["123456"], dtype=np.object_),
    np.array([], dtype=np.object_),
)


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        responses = []
        for _ in requests:
            answer = ANSWERS[self.calls % len(ANSWERS)]
            self.calls += 1
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", answer)]))
        return responses
