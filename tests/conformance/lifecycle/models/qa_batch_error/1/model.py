import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for i, request in enumerate(requests):
            if i % 2 == 0:
                error = pb_utils.TritonError(f"request {i} of a batch of {len(requests)} fails")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", tensor.as_numpy())])
            )
        return responses
