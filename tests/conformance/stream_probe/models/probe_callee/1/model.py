"""BLS callee: streams a few responses; one mode sends an error response midway."""

import time

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if mode == "three":
                for i in range(3):
                    time.sleep(0.05)
                    sender.send(out(i))
                sender.send(flags=FINAL)
            elif mode == "error_mid":
                sender.send(out(0))
                error = pb_utils.TritonError("callee failed midway")
                sender.send(pb_utils.InferenceResponse(error=error))
                sender.send(out(1))
                sender.send(flags=FINAL)
            elif mode == "raise_mid":
                sender.send(out(0))
                raise pb_utils.TritonModelException("callee raised midway")
            elif mode == "slow":
                time.sleep(1.0)
                sender.send(out(9), flags=FINAL)
            elif mode == "big":
                arr = np.arange(100000, dtype=np.int32)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", arr)]))
                sender.send(flags=FINAL)
        return None
