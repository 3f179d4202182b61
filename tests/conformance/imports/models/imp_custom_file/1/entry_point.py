import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        info = {"name": __name__, "file": __file__, "model_dir": pb_utils.get_model_dir()}
        encoded = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", encoded)]) for _ in requests]
