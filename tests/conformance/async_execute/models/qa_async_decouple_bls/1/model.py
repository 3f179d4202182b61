import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The pattern of NVIDIA's qa `async_execute_decouple_bls`: each request is forwarded
    to qa_async_decouple with `await async_exec(decoupled=True)`, every response of the
    iterator is sent on, then the FINAL flag alone."""

    async def _forward(self, request):
        waits = pb_utils.get_input_tensor_by_name(request, "WAIT_SECONDS").as_numpy()
        call = pb_utils.InferenceRequest(
            model_name="qa_async_decouple",
            inputs=[pb_utils.Tensor("WAIT_SECONDS", waits)],
            requested_output_names=["DUMMY_OUT", "OVERLAP"],
        )
        responses = await call.async_exec(decoupled=True)
        sender = request.get_response_sender()
        for response in responses:
            outputs = [
                pb_utils.Tensor(name, pb_utils.get_output_tensor_by_name(response, name).as_numpy())
                for name in ("DUMMY_OUT", "OVERLAP")
            ]
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    async def execute(self, requests):
        await asyncio.gather(*[self._forward(request) for request in requests])
        return None
