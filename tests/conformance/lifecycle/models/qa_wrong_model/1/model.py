import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            responses.append(wrong_name.InferenceResponse([tensor]))  # noqa: F821
        return responses
