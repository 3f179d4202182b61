import json
import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    instances_created = 0

    def __init__(self):
        TritonPythonModel.instances_created += 1

    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config.as_dict()
        marker = os.path.join(pb_utils.get_model_dir(), "..", "auto_complete_called.json")
        with open(marker, "w") as f:
            json.dump(
                {
                    "instances_created": TritonPythonModel.instances_created,
                    "config_type": type(auto_complete_model_config).__name__,
                    "name": config["name"],
                    "input_names": [i["name"] for i in config["input"]],
                },
                f,
            )
        auto_complete_model_config.add_input(
            {"name": "EXTRA", "data_type": "TYPE_FP32", "dims": [2], "optional": True}
        )
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return responses
