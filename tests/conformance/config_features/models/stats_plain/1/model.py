"""Answers as MODE says (config.pbtxt); shared by stats_plain and stats_decoupled."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def answer(mode):
    if mode == "raise":
        raise ValueError("asked to raise")
    if mode in ("error", "sender_error"):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError("asked for an error"))
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([b"ok"], np.object_))])


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            if self.decoupled or mode.startswith("sender") or mode == "none_final":
                sender = request.get_response_sender()
                if mode == "none_final":
                    sender.send(flags=FINAL)
                else:
                    sender.send(answer(mode), flags=FINAL)
                responses.append(None)
            else:
                responses.append(answer(mode))
        return None if self.decoupled or None in responses else responses
