import json
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.tag = np.array([params["TAG"]["string_value"].encode()], dtype=object)
        time.sleep(float(params["INIT_SECONDS"]["string_value"]))

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("TAG", self.tag)]) for _ in requests]
