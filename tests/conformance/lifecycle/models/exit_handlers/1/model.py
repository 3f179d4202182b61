import atexit
import os

import triton_python_backend_utils as pb_utils

LOG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "exit_handlers.log")


def note(what):
    with open(LOG, "a") as f:
        f.write(what + "\n")


atexit.register(note, "import")


class TritonPythonModel:
    def initialize(self, args):
        atexit.register(note, "initialize " + args["model_instance_name"])

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "IN")])
            for r in requests
        ]

    def finalize(self):
        note("finalize")
