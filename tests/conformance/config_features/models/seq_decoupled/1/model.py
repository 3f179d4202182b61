"""Decoupled: IN responses "<correlation id>:<flags>:<START>:<n>" (n counts along the
sequence), then the final flag."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.counts = {}

    def execute(self, requests):
        for request in requests:
            corrid = request.correlation_id()
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy().sum())
            if start:
                self.counts[corrid] = 0
            sender = request.get_response_sender()
            for _ in range(int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])):
                self.counts[corrid] = self.counts.get(corrid, 0) + 1
                text = f"{corrid}:{request.flags()}:{start}:{self.counts[corrid]}"
                out = pb_utils.Tensor("OUT", np.array([text.encode()], np.object_))
                sender.send(pb_utils.InferenceResponse([out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
