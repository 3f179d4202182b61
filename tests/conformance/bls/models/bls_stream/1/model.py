import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._stream, args=(request,), daemon=True).start()
        return None

    def _stream(self, request):
        sender = request.get_response_sender()
        count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
        delay = int(pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()[0])
        for i in range(count):
            time.sleep(delay / 1000.0)
            if sender.is_cancelled():
                out = pb_utils.Tensor("OUT", np.array([-1 - i], np.int32))
                sender.send(pb_utils.InferenceResponse([out]))
                break
            sender.send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))])
            )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
