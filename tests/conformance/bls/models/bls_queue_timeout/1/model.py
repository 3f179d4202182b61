import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            # What qa python_models/identity_fp32_timeout logs: the timeout the caller set.
            pb_utils.Logger.log_info(f"Request timeout: {request.timeout()}")
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return responses
