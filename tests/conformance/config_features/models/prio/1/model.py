"""Sleeps SLEEP seconds (writing <model dir>/busy first); INFO = what the request carries.
Every request id is appended to <model dir>/seen.txt."""

import json
import os
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.busy = os.path.join(args["model_repository"], "busy")
        self.seen = os.path.join(args["model_repository"], "seen.txt")

    def execute(self, requests):
        responses = []
        for request in requests:
            with open(self.seen, "a") as seen:
                seen.write(request.request_id() + "\n")
            seconds = float(pb_utils.get_input_tensor_by_name(request, "SLEEP").as_numpy().sum())
            if seconds > 0:
                with open(self.busy, "w") as marker:
                    marker.write(request.request_id())
                time.sleep(seconds)
            info = {
                "request_id": request.request_id(),
                "timeout": request.timeout(),
                "flags": request.flags(),
                "parameters": json.loads(request.parameters()),
                "batch": len(requests),
            }
            text = np.array([[json.dumps(info).encode()]], np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("INFO", text)]))
        return responses
