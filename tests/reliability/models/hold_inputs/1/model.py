"""Holds each request's inputs in a thread for HOLD_MS after execute (see config.pbtxt)."""

import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def _answer(request, hold_s):
    time.sleep(hold_s)
    data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
    more = pb_utils.get_input_tensor_by_name(request, "IN2")
    extra = more.as_numpy().nbytes if more is not None else 0
    out = np.array([data.nbytes, int(data[-1]) if data.nbytes else -1, extra], dtype=np.int64)
    sender = request.get_response_sender()
    sender.send(
        pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]),
        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    )


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            hold = pb_utils.get_input_tensor_by_name(request, "HOLD_MS")
            hold_s = (int(hold.as_numpy()[0]) if hold is not None else 300) / 1000.0
            threading.Thread(target=_answer, args=(request, hold_s), daemon=True).start()
        return None
