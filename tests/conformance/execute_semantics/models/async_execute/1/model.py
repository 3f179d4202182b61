import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        # A coroutine: the stub runs it on its event loop and uses the return value.
        await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            await asyncio.sleep(0)
            info = np.array([type(loop).__name__.encode()], dtype=object)
            outputs = [pb_utils.Tensor("OUT", data * 2), pb_utils.Tensor("LOOP", info)]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
