import asyncio

import triton_python_backend_utils as pb_utils


def forward(request):
    return pb_utils.InferenceRequest(
        model_name="bls_slow", inputs=request.inputs(), requested_output_names=["OUTPUT0"]
    )


class TritonPythonModel:
    async def execute(self, requests):
        results = await asyncio.gather(*(forward(r).async_exec() for r in requests))
        return [pb_utils.InferenceResponse(r.output_tensors()) for r in results]
