"""Decoupled: two responses and the final flag, sent from a thread after execute returned;
each step is appended to <model dir>/seen.txt."""

import os
import threading
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.record = os.path.join(args["model_repository"], "seen.txt")

    def note(self, text):
        with open(self.record, "a") as record:
            record.write(text + "\n")

    def answer(self, sender, values):
        time.sleep(0.2)
        for _ in range(2):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", values)]))
            self.note("sent")
        self.note("final")  # before it goes: the next sample may start at once
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            self.note(f"execute {values.tolist()} {request.request_id()!r}")
            sender = request.get_response_sender()
            threading.Thread(target=self.answer, args=(sender, values)).start()
        self.note("returned")
        return None
