import json

import numpy as np

import triton_python_backend_utils as pb_utils


def describe(request):
    corrid = request.correlation_id()
    return {
        "request_id": request.request_id(),
        "correlation_id": corrid,
        "correlation_id_type": type(corrid).__name__,
        "flags": request.flags(),
        "timeout": request.timeout(),
        "parameters": request.parameters(),
        "parameters_type": type(request.parameters()).__name__,
        "requested_output_names": sorted(request.requested_output_names()),
    }


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            info = np.array([json.dumps(describe(request)).encode()], dtype=object)
            extra = pb_utils.Tensor("EXTRA", np.array([0], np.int32))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("INFO", info), extra]))
        return responses
