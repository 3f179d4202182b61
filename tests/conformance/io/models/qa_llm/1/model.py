import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        text_config = pb_utils.get_output_config_by_name(config, "text_output")
        self.text_dtype = pb_utils.triton_string_to_numpy(text_config["data_type"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = np.array(["bla0".encode("utf8")]).astype(self.text_dtype)
            index = np.array([[0]]).astype(np.int32)
            outputs = [
                pb_utils.Tensor("text_output", text),
                pb_utils.Tensor("sequence_index", index),
            ]
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
