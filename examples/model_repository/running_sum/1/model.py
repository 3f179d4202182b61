"""A running sum per sequence: the state a stateful model keeps between the requests of a
sequence, set at START, dropped at END, and dropped by ``sequence_idle`` (a pybackend
extension) when the server ends a sequence whose client went away without END."""

import numpy as np

import triton_python_backend_utils as pb_utils

START = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
END = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}  # correlation id -> the sequence's sum so far

    def execute(self, requests):
        responses = []
        for request in requests:
            sequence = request.correlation_id()
            if request.flags() & START:
                self.sums[sequence] = 0
            value = pb_utils.get_input_tensor_by_name(request, "VALUE").as_numpy()  # [1, 1]
            self.sums[sequence] += int(value.sum())
            total = np.array([[self.sums[sequence]]], dtype=np.int64)
            if request.flags() & END:
                del self.sums[sequence]
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", total)]))
        return responses

    def sequence_idle(self, correlation_id):
        # The server ended this sequence after max_sequence_idle_microseconds without a
        # request (its client never sent END): pybackend tells the model, which drops it.
        self.sums.pop(correlation_id, None)
