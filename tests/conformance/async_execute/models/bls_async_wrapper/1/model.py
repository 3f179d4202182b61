import triton_python_backend_utils as pb_utils

TARGET = "async_default_c8"


class TritonPythonModel:
    """A thin BLS wrapper: forwards each request to TARGET with `await async_exec()`."""

    async def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name=TARGET,
                inputs=[pb_utils.get_input_tensor_by_name(request, "MODE")],
                requested_output_names=["MSG"],
            )
            response = await call.async_exec()
            if response.has_error():
                responses.append(pb_utils.InferenceResponse(error=response.error()))
            else:
                responses.append(pb_utils.InferenceResponse(response.output_tensors()))
        return responses
