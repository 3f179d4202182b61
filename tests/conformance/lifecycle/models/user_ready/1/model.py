import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.flag = os.path.join(args["model_repository"], "ready_flag")
        self.calls = os.path.join(args["model_repository"], "is_ready_calls")

    def is_ready(self):
        # Every call leaves a line, so a test can tell "never asked" from "asked, said yes".
        with open(self.calls, "a") as f:
            f.write(f"{os.getpid()}\n")
        if not os.path.exists(self.flag):
            return True
        with open(self.flag) as f:
            return f.read().strip() == "yes"

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return responses
