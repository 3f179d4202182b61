"""Records every request it is given (warmup samples included) in <model dir>/seen.jsonl:
batch size, request id, correlation id, flags and each input's dtype, shape and values.
MODE (an optional BYTES input, also set by a warmup sample's file) picks a failure:
"raise" raises, "error" answers with an error response."""

import json
import os

import numpy as np

import triton_python_backend_utils as pb_utils


def plain(values):
    return [v.decode(errors="backslashreplace") if isinstance(v, bytes) else v for v in values]


class TritonPythonModel:
    def initialize(self, args):
        self.record = os.path.join(args["model_repository"], "seen.jsonl")

    def execute(self, requests):
        responses = []
        for request in requests:
            inputs = {}
            for tensor in request.inputs():
                array = tensor.as_numpy()
                values = plain(array.reshape(-1).tolist())
                inputs[tensor.name()] = [array.dtype.str, list(array.shape), values]
            seen = {
                "batch": len(requests),
                "request_id": request.request_id(),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "inputs": inputs,
            }
            with open(self.record, "a") as record:
                record.write(json.dumps(seen) + "\n")
            mode = inputs.get("MODE", [None, None, [""]])[2][0]
            if mode == "raise":
                raise ValueError("warmup asked to raise")
            if mode == "error":
                error = pb_utils.TritonError("warmup asked for an error")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            rows = request.inputs()[0].as_numpy().shape[0]
            out = np.full((rows, 1), len(inputs), np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
