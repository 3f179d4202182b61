import json
import os

import numpy as np

import triton_python_backend_utils as pb_utils


def write(path, record):
    # Versions of one model load concurrently and share the instance name: a private tmp
    # name keeps their writes apart, os.replace makes each file appear whole.
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        self.state = os.path.join(args["model_repository"], "state")
        os.makedirs(self.state, exist_ok=True)
        record = {
            "args": args,
            "args_type": type(args).__name__,
            "value_types": sorted({type(v).__name__ for v in args.values()}),
            "pid": os.getpid(),
            "module": __name__,
        }
        write(os.path.join(self.state, self.stem() + ".init.json"), record)

    def stem(self):
        """State files are per instance AND version: every version has instance 'versions_0'."""
        return f"{self.args['model_instance_name']}.v{self.args['model_version']}"

    def execute(self, requests):
        who = {
            "instance": self.args["model_instance_name"],
            "version": self.args["model_version"],
            "module": __name__,
            "pid": os.getpid(),
        }
        encoded = np.array([json.dumps(who).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("WHO", encoded)]) for _ in requests]

    def finalize(self):
        write(os.path.join(self.state, self.stem() + ".finalize.json"), {"pid": os.getpid()})
