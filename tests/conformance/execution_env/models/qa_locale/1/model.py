import json
import locale

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        # NVIDIA's qa model logs this line at load; the test reads the server log for it.
        pb_utils.Logger.log_info(f"Locale is {locale.getlocale()}")

    def execute(self, requests):
        seen = json.dumps(list(locale.getlocale())).encode()
        out = pb_utils.Tensor("LOCALE", np.array([seen], dtype=object))
        return [pb_utils.InferenceResponse([out]) for _ in requests]
