import json
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils

POLL_S = 0.005
GIVE_UP_S = 20.0


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


def msg(text):
    array = np.array([text.encode()], dtype=object)
    return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", array)])


class TritonPythonModel:
    """MODE "request:<key>" / "sender:<key>": stream a response every 20 ms from a thread
    until request.is_cancelled() / sender.is_cancelled() says so; record when (wall clock)
    under <key>. MODE "report:<key>" answers with that record as JSON."""

    def initialize(self, args):
        self.records = {}

    def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            how, _, key = mode.partition(":")
            sender = request.get_response_sender()
            if how == "report":
                record = self.records.get(key, {"noticed": None})
                sender.send(
                    msg(json.dumps(record)), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
            else:
                args = (request, sender, how, key)
                threading.Thread(target=self.stream_until_cancelled, args=args).start()
        return None

    def stream_until_cancelled(self, request, sender, how, key):
        check = request.is_cancelled if how == "request" else sender.is_cancelled
        start = time.monotonic()
        sent = 0
        next_send = start
        record = {"noticed": None}
        while time.monotonic() - start < GIVE_UP_S:
            if check():
                record = {
                    "noticed": time.time(),
                    "sent": sent,
                    "request": request.is_cancelled(),
                    "sender": sender.is_cancelled(),
                }
                break
            if time.monotonic() >= next_send:
                sender.send(out(sent))
                sent += 1
                next_send += 0.02
            time.sleep(POLL_S)
        self.records[key] = record
        # The model still ends the request; the README suggests a CANCELLED error.
        error = pb_utils.TritonError("cancelled by the client", pb_utils.TritonError.CANCELLED)
        sender.send(
            pb_utils.InferenceResponse(error=error),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )
