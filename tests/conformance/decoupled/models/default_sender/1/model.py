import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    """Default mode: the one response of a request may come from the sender after
    execute returned None (the model keeps the sender; a thread answers later)."""

    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if mode == "thread_final":
                threading.Thread(target=self.later, args=(sender, [(out(21), final)])).start()
            elif mode == "thread_two_step":
                steps = [(out(22), 0), (None, final)]
                threading.Thread(target=self.later, args=(sender, steps)).start()
            elif mode == "dropped_unused":
                pass  # the sender is obtained, never used and dropped with the request
        return None

    def later(self, sender, steps):
        time.sleep(0.1)  # execute has returned and the request was released by now
        for response, flags in steps:
            sender.send(response, flags=flags)
