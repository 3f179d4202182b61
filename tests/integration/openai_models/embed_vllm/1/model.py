"""Answers an embedding request (the vLLM backend's 'embedding_request' JSON) with the vector
[characters, words] of its input, cut to pooling_params.dimensions[0] when given, as JSON in
'text_output', and the word count as 'num_input_tokens' (in a first response, then an empty
final one, as a decoupled model may). It checks that 'text_input' carries the same text.
The text "!generate-only" is refused as the vLLM backend refuses an embedding request to a
generation model."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            asked = pb_utils.get_input_tensor_by_name(request, "embedding_request")
            if asked is None:
                error = pb_utils.TritonError("this model only embeds")
                sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                continue
            asked = json.loads(asked.as_numpy()[0])
            text = asked["input"]
            if text == "!generate-only":  # how a vLLM model of another task refuses
                said = "Model embed_vllm does not support 'embed' request"
                error = pb_utils.TritonError(f"Error generating stream: {said}")
                sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                continue
            same = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0]
            assert same.decode() == text, (same, text)
            vector = [float(len(text)), float(len(text.split()))]
            dimensions = asked.get("pooling_params", {}).get("dimensions")
            if dimensions:
                vector = vector[: dimensions[0]]
            outputs = [
                pb_utils.Tensor("text_output", np.array([json.dumps(vector)], np.object_)),
                pb_utils.Tensor("num_input_tokens", np.array([len(text.split())], np.uint32)),
            ]
            sender.send(pb_utils.InferenceResponse(outputs))
            sender.send(flags=FINAL)
        return None
