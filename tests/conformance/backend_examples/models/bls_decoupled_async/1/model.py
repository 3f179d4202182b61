import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """python_backend's examples/bls_decoupled async model: two async_exec(decoupled=True)
    calls to square_int32 awaited together; SUM adds up the OUT of both streams."""

    async def execute(self, requests):
        responses = []
        for request in requests:
            calls = [
                pb_utils.InferenceRequest(
                    model_name="square_int32",
                    inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                    requested_output_names=["OUT"],
                ).async_exec(decoupled=True)
                for _ in range(2)
            ]
            total = np.zeros(1, dtype=np.int32)
            for stream in await asyncio.gather(*calls):
                for response in stream:
                    if response.has_error():
                        raise pb_utils.TritonModelException(response.error().message())
                    out = pb_utils.get_output_tensor_by_name(response, "OUT")
                    if out is not None:
                        total += out.as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", total)]))
        return responses
