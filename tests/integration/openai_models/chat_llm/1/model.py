"""Answers a conversation (JSON) with what it was given: the roles in order, the last
message's text, and the max_tokens and temperature tensors when sent."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


def scalar(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().ravel()[0].item()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "messages").as_numpy()
            messages = json.loads(raw.ravel()[0])
            roles = ",".join(m["role"] for m in messages)
            temperature = scalar(request, "temperature")
            text = (
                f"roles={roles} last={messages[-1]['content']} "
                f"max_tokens={scalar(request, 'max_tokens')} "
                f"temperature={None if temperature is None else round(temperature, 3)}"
            )
            out = np.array([[text.encode()]], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", out)]))
        return responses
