import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The input back as an output made with Tensor.from_dlpack."""

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            out = pb_utils.Tensor.from_dlpack("OUTPUT0", data.to_dlpack())
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
