"""A python-based backend ("runtime"): one model.py in backends/pbb_scaler/ serves every model
whose config says `backend: "pbb_scaler"`, each with its own config and parameters, the way
the vLLM backend serves many LLMs. Written as for the original backend."""

import json
import os

import numpy as np

# A package next to model.py in the backend directory (the vLLM backend imports its
# `utils.metrics` this way): the backend directory is on sys.path.
from pbb_rules.scaling import scale

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        # A model may name only the backend and its parameters; the runtime declares the I/O.
        present = {t["name"] for t in config.as_dict()["input"] + config.as_dict()["output"]}
        if "X" not in present:
            config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [-1]})
        for name, dtype in (("Y", "TYPE_FP32"), ("WHERE", "TYPE_STRING")):
            if name not in present:
                config.add_output({"name": name, "data_type": dtype, "dims": [-1]})
        config.set_max_batch_size(0)
        return config

    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.factor = float(parameters["FACTOR"]["string_value"])
        # Per-version settings in the version directory, as the vLLM backend's model.json.
        settings = os.path.join(pb_utils.get_model_dir(), "model.json")
        self.offset = 0.0
        if os.path.isfile(settings):
            with open(settings) as f:
                self.offset = float(json.load(f)["offset"])
        self.where = json.dumps(
            {
                "file": __file__,
                "module": __name__,
                "model_dir": pb_utils.get_model_dir(),
                "model_repository": args["model_repository"],
                "model_name": args["model_name"],
                "model_version": args["model_version"],
            }
        )

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = scale(x, self.factor, self.offset)
            where = np.array([self.where.encode()], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("Y", y), pb_utils.Tensor("WHERE", where)]
                )
            )
        return responses
