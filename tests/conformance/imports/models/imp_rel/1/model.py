import json
import os
import sys

import model_level
import numpy as np

import triton_python_backend_utils as pb_utils

from . import sibling
from .pkg import deep
from .sibling import VALUE


def position(path):
    path = os.path.normpath(path)
    normalized = [os.path.normpath(p) for p in sys.path]
    return normalized.index(path) if path in normalized else -1


class TritonPythonModel:
    def initialize(self, args):
        self.args = args

    def execute(self, requests):
        version_dir = os.path.join(self.args["model_repository"], self.args["model_version"])
        info = {
            "name": __name__,
            "package": __package__,
            "file": __file__,
            "model_dir": pb_utils.get_model_dir(),
            "sibling": sibling.__name__,
            "deep": deep.__name__,
            "values": [VALUE, deep.DEEP, model_level.LEVEL],
            "same_utils": sibling.UTILS is pb_utils,
            "version_dir_on_path": position(version_dir),
            "model_dir_on_path": position(self.args["model_repository"]),
        }
        encoded = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", encoded)]) for _ in requests]
