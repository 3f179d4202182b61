import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            if count == 0:
                sender.send(flags=FINAL)
            for i in range(count):
                await asyncio.sleep(0.001)
                out = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))])
                sender.send(out, flags=FINAL if i == count - 1 else 0)
        return None
