"""async BLS fan-out: several requests to add_sub in flight at once from `async def execute`."""

import asyncio
import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.scales = int(config["parameters"]["SCALES"]["string_value"])

    async def execute(self, requests):
        return await asyncio.gather(*(self.run(request) for request in requests))

    async def run(self, request):
        in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
        calls = [
            pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[
                    pb_utils.Tensor("INPUT0", in0),
                    pb_utils.Tensor("INPUT1", (in1 * k).astype(np.float32)),
                ],
                requested_output_names=["OUTPUT0"],
            ).async_exec()
            for k in range(1, self.scales + 1)
        ]
        responses = await asyncio.gather(*calls)
        for response in responses:
            if response.has_error():
                return pb_utils.InferenceResponse(error=response.error())
        sums = np.stack(
            [pb_utils.get_output_tensor_by_name(r, "OUTPUT0").as_numpy() for r in responses]
        )
        return pb_utils.InferenceResponse([pb_utils.Tensor("SUMS", sums)])
