"""A model whose load is slow, as one that imports torch and loads weights: SLOW_LOAD_IMPORT_S
seconds at import, SLOW_LOAD_INIT_S in initialize, and initialize holds (up to 60 s) while
the file SLOW_LOAD_HOLD_WHILE exists. Serves an identity of IN. Its finalize is slow too
(SLOW_FINALIZE_S, as one that saves state), then writes a file named after the instance
into the directory SLOW_FINALIZE_DONE, if set: the proof that finalize ran to its end."""

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
        self.instance = args["model_instance_name"]

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())]
            )
            for r in requests
        ]

    def finalize(self):
        time.sleep(float(os.environ.get("SLOW_FINALIZE_S", "0")))
        done = os.environ.get("SLOW_FINALIZE_DONE", "")
        if done:
            with open(os.path.join(done, self.instance), "w") as f:
                f.write(str(os.getpid()))
