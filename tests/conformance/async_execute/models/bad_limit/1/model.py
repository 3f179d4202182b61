import asyncio
import json

import numpy as np

import triton_python_backend_utils as pb_utils


def msg(text):
    array = np.array([text.encode()], dtype=object)
    return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", array)])


class TritonPythonModel:
    """MODE "sleep:<s>": `await asyncio.sleep(s)` in `async def execute`, counting how many
    batches are inside execute at once; MODE "peak" answers with the highest count seen
    since the last "peak" (and resets it). Default mode returns the responses; decoupled
    mode sends them through the senders."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.inflight = 0
        self.peak = 0

    async def execute(self, requests):
        modes = [
            pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0].decode() for r in requests
        ]
        if modes[0] == "peak":
            responses = [msg(str(self.peak)) for _ in requests]
            self.peak = 0
        else:
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
            try:
                await asyncio.sleep(float(modes[0].split(":")[1]))
            finally:
                self.inflight -= 1
            responses = [msg("slept") for _ in requests]
        if not self.decoupled:
            return responses
        for request, response in zip(requests, responses):
            request.get_response_sender().send(
                response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            )
        return None
