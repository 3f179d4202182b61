"""OUT = IN * 3, TEXT = IN as text, CALL = how many requests execute has seen so far (a
cached answer repeats the number of the call that made it). A negative element answers with
an error response. Every request is appended to <model dir>/seen.txt."""

import os

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = os.path.join(args["model_repository"], "seen.txt")
        self.calls = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            self.calls += 1
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            with open(self.seen, "a") as seen:
                seen.write(" ".join(str(v) for v in values.tolist()) + "\n")
            if (values < 0).any():
                error = pb_utils.TritonError("negative input")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            text = np.array([str(v).encode() for v in values.tolist()], np.object_)
            outputs = [
                pb_utils.Tensor("OUT", values * 3),
                pb_utils.Tensor("TEXT", text),
                pb_utils.Tensor("CALL", np.array([self.calls], np.int64)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
