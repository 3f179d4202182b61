"""UPPER = TEXT upper-cased; LENGTHS (not mapped by the ensembles); SEEN = what was asked."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            if b"raise" in text.tolist():
                raise ValueError("ens_upper was asked to raise")
            seen = {
                "requested": sorted(request.requested_output_names()),
                "dtype": text.dtype.str,
                "values": [v.decode(errors="replace") for v in text.tolist()],
            }
            upper = np.array([v.upper() for v in text.tolist()], np.object_)
            lengths = np.array([len(v) for v in text.tolist()], np.int32)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("UPPER", upper),
                        pb_utils.Tensor("LENGTHS", lengths),
                        pb_utils.Tensor("SEEN", np.array([json.dumps(seen).encode()], np.object_)),
                    ]
                )
            )
        return responses
