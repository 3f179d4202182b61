import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Reschedules each request STEPS-1 times (returning None for it), then answers with the
    number of executions it took. MODE "respond_while_rescheduled" breaks the rule."""

    def initialize(self, args):
        self.runs = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            steps = int(pb_utils.get_input_tensor_by_name(request, "STEPS").as_numpy()[0])
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            key = request.request_id()
            runs = self.runs.get(key, 0) + 1
            if runs < steps:
                self.runs[key] = runs
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                if mode == "respond_while_rescheduled":
                    self.runs.pop(key, None)
                    responses.append(pb_utils.InferenceResponse([]))
                else:
                    responses.append(None)
            else:
                self.runs.pop(key, None)
                value = np.array([runs], np.int32)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value)]))
        return responses
