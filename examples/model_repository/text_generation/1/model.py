"""A stand-in for an LLM: "generates" its reply word by word from the prompt (or the last
user message of a conversation): the words reversed and capitalised.

It reads its inputs as a model served by NVIDIA's vLLM backend does, so the same
OpenAI-compatible endpoint serves both: `max_tokens` and `stop` from `sampling_parameters`
(JSON), `stream` for one response per word (else one response with the whole text), and
`finish_reason` ("length" when max_tokens cut it, else "stop"). `async def execute` in
decoupled mode returns at once; each request streams from its own asyncio task, and stops
early when the client goes away (the endpoint cancels the request then).
"""

import asyncio
import json

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def text_of(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().ravel()[0].decode()


def flag_of(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return tensor is not None and bool(tensor.as_numpy().ravel()[0])


def words_for(request):
    """The reply's words, and why they end ("stop" or "length")."""
    prompt = text_of(request, "text_input")
    messages = text_of(request, "messages")
    if messages is not None:  # a chat: answer the last user message
        said = [m.get("content") for m in json.loads(messages) if m.get("role") == "user"]
        prompt = said[-1] if said and isinstance(said[-1], str) else ""
    words = [w.capitalize() for w in reversed((prompt or "").split())] or ["(silence)"]
    sampling = json.loads(text_of(request, "sampling_parameters") or "{}")
    for stop in sampling.get("stop") or []:
        if stop in words:
            words = words[: words.index(stop)]
    limit = sampling.get("max_tokens")
    if limit is not None and len(words) > limit:
        return words[:limit], "length"
    return words, "stop"


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config["parameters"]["WORD_DELAY_MS"]["string_value"]
        self.delay = int(delay) / 1000.0
        self.tasks = set()  # keeps running tasks referenced

    async def execute(self, requests):
        for request in requests:
            task = asyncio.get_running_loop().create_task(self.generate(request))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return None

    async def generate(self, request):
        sender = request.get_response_sender()
        words, reason = words_for(request)
        pieces = [(" " if i else "") + w for i, w in enumerate(words)]
        if not flag_of(request, "stream"):
            pieces = ["".join(pieces)]
        for i, piece in enumerate(pieces):
            if len(pieces) > 1:
                await asyncio.sleep(self.delay)
            if sender.is_cancelled():  # the client went away: stop generating
                sender.send(flags=FINAL)
                return
            last = i == len(pieces) - 1
            outputs = [
                pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_)),
                pb_utils.Tensor(
                    "finish_reason", np.array([reason.encode() if last else b""], np.object_)
                ),
            ]
            sender.send(pb_utils.InferenceResponse(outputs))
        sender.send(flags=FINAL)
