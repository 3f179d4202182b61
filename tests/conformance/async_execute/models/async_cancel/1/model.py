import asyncio
import json
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def msg(text):
    array = np.array([text.encode()], dtype=object)
    return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", array)])


class TritonPythonModel:
    """MODE "wait:<key>": `await asyncio.sleep(20)`; when the coroutine is cancelled, record
    when (wall clock) under <key> and let the CancelledError go on. MODE "report:<key>"
    answers with the record as JSON."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
        self.records = {}

    async def execute(self, requests):
        mode = pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0].decode()
        how, _, key = mode.partition(":")
        if how == "report":
            responses = [msg(json.dumps(self.records.get(key))) for _ in requests]
        else:
            try:
                await asyncio.sleep(20)
            except asyncio.CancelledError:
                self.records[key] = {"cancelled_at": time.time()}
                raise
            responses = [msg("not cancelled") for _ in requests]
        if not self.decoupled:
            return responses
        for request, response in zip(requests, responses):
            request.get_response_sender().send(
                response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            )
        return None
