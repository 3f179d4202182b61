"""Embeds a text as [characters, words, vowels, its first character's code point] (the
first `dimensions` of them when asked); its token count is its word count. The text "!fail"
fails the request. Each text it gets is appended to `seen` in its model directory."""

import os

import numpy as np

import triton_python_backend_utils as pb_utils


def embed(text, dimensions):
    vowels = sum(text.count(v) for v in "aeiou")
    return np.array([len(text), len(text.split()), vowels, ord(text[0])], np.float32)[:dimensions]


def value(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().ravel()[0]


class TritonPythonModel:
    def initialize(self, args):
        self.seen = os.path.join(args["model_repository"], "seen")

    def execute(self, requests):
        responses = []
        for request in requests:
            text = value(request, "text_input").decode()
            with open(self.seen, "a") as f:
                f.write(text + "\n")
            if text == "!fail":
                error = pb_utils.TritonError("the model failed on purpose")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            dimensions = value(request, "dimensions")
            outputs = [pb_utils.Tensor("embedding", embed(text, dimensions)[None, :])]
            if value(request, "return_num_input_tokens"):
                words = np.array([[len(text.split())]], np.uint32)
                outputs.append(pb_utils.Tensor("num_input_tokens", words))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
