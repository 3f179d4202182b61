"""OUT[i] = IN[i] reversed (BYTES in, BYTES out)."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            values = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            reversed_ = np.array([v[::-1] for v in values], dtype=np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", reversed_)]))
        return out
