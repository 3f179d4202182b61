import argparse
import json
import sys

import numpy as np

import triton_python_backend_utils as pb_utils

parser = argparse.ArgumentParser()
parser.add_argument("--scale", type=float, default=2.0)
ARGS = parser.parse_args()  # exits (failing the load) on arguments it does not know
ARGV_AT_IMPORT = list(sys.argv)


class TritonPythonModel:
    def initialize(self, args):
        self.argv_at_initialize = list(sys.argv)

    def execute(self, requests):
        seen = {
            "scale": ARGS.scale,
            "import": ARGV_AT_IMPORT,
            "initialize": self.argv_at_initialize,
            "execute": list(sys.argv),
        }
        text = np.array([json.dumps(seen).encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", text)]) for _ in requests]
