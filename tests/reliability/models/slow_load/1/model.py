"""A model whose load is slow, as one that imports torch and loads weights: SLOW_LOAD_IMPORT_S
seconds at import, SLOW_LOAD_INIT_S in initialize, and initialize holds (up to 60 s) while
the file SLOW_LOAD_HOLD_WHILE exists. Serves an identity of IN."""

import os
import time

import triton_python_backend_utils as pb_utils

time.sleep(float(os.environ.get("SLOW_LOAD_IMPORT_S", "0")))


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(float(os.environ.get("SLOW_LOAD_INIT_S", "0")))
        hold = os.environ.get("SLOW_LOAD_HOLD_WHILE", "")
        deadline = time.monotonic() + 60
        while hold and os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]
