"""A sequence model: OUT is the running sum of IN over the sequence, keyed by the correlation
id. Every request it is given (null requests of the direct strategy included) is recorded in
<model dir>/seen.jsonl: batch size, correlation_id(), flags() and the control tensors."""

import json
import os

import numpy as np

import triton_python_backend_utils as pb_utils

CONTROLS = ("START", "END", "READY", "CORRID")


def plain(value):
    return value.decode() if isinstance(value, bytes) else value


def control_values(request):
    seen = {}
    for name in CONTROLS:
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is not None:
            array = tensor.as_numpy()
            values = [plain(v) for v in array.reshape(-1).tolist()]
            seen[name] = [array.dtype.str, list(array.shape), values]
    return seen


class TritonPythonModel:
    def initialize(self, args):
        self.record = os.path.join(args["model_repository"], "seen.jsonl")
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            corrid = request.correlation_id()
            value = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().sum())
            seen = {
                "batch": len(requests),
                "correlation_id": corrid,
                "type": type(corrid).__name__,
                "flags": request.flags(),
                "in": value,
                "inputs": sorted(t.name() for t in request.inputs()),
            }
            seen.update(control_values(request))
            if request.flags() & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                self.sums[corrid] = 0
            # A null request (the direct strategy's filler of an empty slot) carries data
            # nobody reads back; it counts for nothing.
            if corrid != 0:
                self.sums[corrid] = self.sums.get(corrid, 0) + value
            with open(self.record, "a") as record:
                record.write(json.dumps(seen) + "\n")
            out = np.array([[self.sums.get(corrid, 0)]], np.int32)
            info = np.array([[json.dumps(seen).encode()]], np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", out), pb_utils.Tensor("INFO", info)]
                )
            )
        return responses
