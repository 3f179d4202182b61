import numpy as np

import triton_python_backend_utils as pb_utils

TENSORS = ("INPUT0", "INPUT1"), ("OUTPUT0", "OUTPUT1")


class TritonPythonModel:
    """python_backend's examples/auto_complete nobatch model: no config.pbtxt; the model
    declares two FP32 [4] inputs and outputs and max_batch_size 0,
    adding only what the configuration lacks (read through as_dict)."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config.as_dict()
        have_inputs = {tensor["name"] for tensor in config["input"]}
        have_outputs = {tensor["name"] for tensor in config["output"]}
        inputs, outputs = TENSORS
        for name in inputs:
            if name not in have_inputs:
                auto_complete_model_config.add_input(
                    {"name": name, "data_type": "TYPE_FP32", "dims": [4]}
                )
        for name in outputs:
            if name not in have_outputs:
                auto_complete_model_config.add_output(
                    {"name": name, "data_type": "TYPE_FP32", "dims": [4]}
                )
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            first = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            second = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [
                pb_utils.Tensor("OUTPUT0", (first + second).astype(np.float32)),
                pb_utils.Tensor("OUTPUT1", (first - second).astype(np.float32)),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
