import json
import time

import numpy as np

import triton_python_backend_utils as pb_utils

POLL_S = 0.005
GIVE_UP_S = 20.0


def msg(text):
    array = np.array([text.encode()], dtype=object)
    return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", array)])


class TritonPythonModel:
    """MODE "wait:<key>": execute polls request.is_cancelled() until the client cancels and
    records when (wall clock) under <key>; MODE "report:<key>" returns the record."""

    def initialize(self, args):
        self.records = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            how, _, key = mode.partition(":")
            if how == "report":
                responses.append(msg(json.dumps(self.records.get(key, {"noticed": None}))))
                continue
            start = time.monotonic()
            record = {"noticed": None}
            while time.monotonic() - start < GIVE_UP_S:
                if request.is_cancelled():
                    record = {"noticed": time.time()}
                    break
                time.sleep(POLL_S)
            self.records[key] = record
            error = pb_utils.TritonError("cancelled by the client", pb_utils.TritonError.CANCELLED)
            responses.append(pb_utils.InferenceResponse(error=error))
        return responses
