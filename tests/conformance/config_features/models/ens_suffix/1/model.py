"""OUT = TEXT + b"!"; an element b"ERROR" answers with an error response instead."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            if b"ERROR" in text.tolist():
                error = pb_utils.TritonError(
                    "ens_suffix refuses ERROR", pb_utils.TritonError.INVALID_ARG
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            out = np.array([v + b"!" for v in text.tolist()], np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
