"""Answers a prompt with its words reversed, as an LLM served in the vLLM backend's
convention would: deltas when streaming, the finish reason and token counts when asked.

Prompts that start with a command test the endpoint: ``!params`` answers with the
sampling_parameters JSON it got, its flags and every input's dtype and shape; ``!fail`` fails
(streaming: after one word), ``!failfirst`` before any, ``!refuse`` before any with
INVALID_ARG, counting its refusals in ``refusals`` in its model directory (the test reads
it); ``!sleep S`` waits S seconds before
answering; ``!slow N`` sends N words 50 ms apart (not streaming: takes as long, then sends
them at once) and, when cancelled, writes ``cancelled`` in its model directory (the test
reads it). The prompt's token count comes with the first
response only (later ones say 0), as some servers do.
"""

import json
import os
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def flag(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else bool(tensor.as_numpy()[0])


class TritonPythonModel:
    def initialize(self, args):
        self.marker = os.path.join(args["model_repository"], "cancelled")

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self.generate, args=(request,), daemon=True).start()
        return None

    def cancelled(self, sender, delay, done):
        """After ``delay``: whether the request was cancelled (then said in the marker file,
        and the stream ended)."""
        time.sleep(delay)
        if not sender.is_cancelled():
            return False
        with open(self.marker, "w") as f:
            f.write(f"after {done} pieces")
        sender.send(flags=FINAL)
        return True

    def generate(self, request):
        sender = request.get_response_sender()
        prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0].decode()
        params_tensor = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
        params = json.loads(params_tensor.as_numpy()[0]) if params_tensor is not None else {}
        stream = bool(flag(request, "stream"))
        counts = flag(request, "return_num_output_tokens")
        delay = 0.0
        if prompt.startswith("!params"):
            flags = {
                n: flag(request, n)
                for n in (
                    "stream",
                    "exclude_input_in_output",
                    "return_finish_reason",
                    "return_num_input_tokens",
                    "return_num_output_tokens",
                )
            }
            tensors = {
                t.name(): [str(t.as_numpy().dtype), list(t.as_numpy().shape)]
                for t in request.inputs()
            }
            said = {"sampling": params, "flags": flags, "tensors": tensors}
            words = [json.dumps(said, sort_keys=True)]
        elif prompt.startswith("!sleep"):
            time.sleep(float(prompt.split()[1]))
            words = ["awake"]
        elif prompt.startswith("!slow"):
            words = [f"w{i}" for i in range(int(prompt.split()[1]))]
            delay = 0.05
        else:
            words = list(reversed(prompt.split()))
        limit = params.get("max_tokens")
        reason = "length" if limit is not None and len(words) > limit else "stop"
        words = words[:limit]
        stops = params.get("stop") or []
        if any(w in stops for w in words):
            words = words[: min(words.index(s) for s in stops if s in words)]
            reason = "stop"
        pieces = [(" " if i else "") + w for i, w in enumerate(words)]
        if not stream:
            # A whole answer is one response, made as slowly as the pieces would be.
            for i in range(len(pieces)):
                if self.cancelled(sender, delay, i):
                    return
            pieces, delay = ["".join(pieces)], 0.0
        for i, piece in enumerate(pieces):
            if self.cancelled(sender, delay, i):
                return
            if prompt.startswith("!refuse"):
                counted = os.path.join(os.path.dirname(self.marker), "refusals")
                with open(counted, "a") as marks:
                    marks.write("x")
                error = pb_utils.TritonError(
                    "the prompt is refused", pb_utils.TritonError.INVALID_ARG
                )
                sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                return
            failing_at = 0 if prompt.startswith("!failfirst") or not stream else 1
            if prompt.startswith("!fail") and i == failing_at:
                error = pb_utils.TritonError("the model failed on purpose")
                sender.send(pb_utils.InferenceResponse(error=error), flags=FINAL)
                return
            last = i == len(pieces) - 1
            outputs = [
                pb_utils.Tensor("text_output", np.array([piece.encode()], dtype=np.object_)),
                pb_utils.Tensor(
                    "finish_reason",
                    np.array([(reason if last else "None").encode()], dtype=np.object_),
                ),
            ]
            if counts:
                given = len(prompt.split()) if i == 0 else 0
                outputs.append(pb_utils.Tensor("num_input_tokens", np.array([given], np.uint32)))
                words_here = len(piece.split())
                outputs.append(
                    pb_utils.Tensor("num_output_tokens", np.array([words_here], np.uint32))
                )
            sender.send(pb_utils.InferenceResponse(outputs))
        sender.send(flags=FINAL)
