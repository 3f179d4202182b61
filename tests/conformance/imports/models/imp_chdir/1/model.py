import json
import os

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        before = os.getcwd()
        os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "elsewhere"))
        try:
            import only_here

            self.found = only_here.VALUE
        except ImportError as e:
            self.found = f"{type(e).__name__}: {e}"
        finally:
            os.chdir(before)

    def execute(self, requests):
        text = np.array([json.dumps({"found": self.found}).encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", text)]) for _ in requests]
