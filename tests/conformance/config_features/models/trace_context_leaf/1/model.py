"""What request.trace().get_context() gives the model."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor(
                        "CTX",
                        np.array(
                            [json.dumps({"own": r.trace().get_context()}).encode()], np.object_
                        ),
                    )
                ]
            )
            for r in requests
        ]
