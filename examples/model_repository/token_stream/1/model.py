"""A token-streaming decoupled model: "generates" a reply one word at a time.

`async def execute` in decoupled mode returns at once; every request streams from its own
asyncio task through its response sender, so many streams are served at once by one
instance. A client that cancels (or disconnects) stops its stream early.
"""

import asyncio
import json

import numpy as np

import triton_python_backend_utils as pb_utils


def reply_for(prompt: str) -> list:
    """The words of the reply: here simply the prompt's words, reversed and capitalised."""
    words = prompt.split() or ["(empty", "prompt)"]
    return [w.capitalize() for w in reversed(words)]


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config.get("parameters", {}).get("TOKEN_DELAY_MS", {}).get("string_value", "20")
        self.delay = int(delay) / 1000.0
        self.tasks = set()  # keeps running tasks referenced

    async def execute(self, requests):
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()[0].decode()
            max_tokens = pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS")
            limit = int(max_tokens.as_numpy()[0]) if max_tokens is not None else None
            task = asyncio.get_running_loop().create_task(
                self.stream(request.get_response_sender(), reply_for(prompt)[:limit])
            )
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return None

    async def stream(self, sender, tokens):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for index, token in enumerate(tokens):
            await asyncio.sleep(self.delay)
            if sender.is_cancelled():
                error = pb_utils.TritonError("stream cancelled", pb_utils.TritonError.CANCELLED)
                sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                return
            outputs = [
                pb_utils.Tensor("TOKEN", np.array([token.encode()], dtype=np.object_)),
                pb_utils.Tensor("INDEX", np.array([index], dtype=np.int32)),
            ]
            sender.send(pb_utils.InferenceResponse(outputs))
        sender.send(flags=final)  # the stream ends: an empty final response
