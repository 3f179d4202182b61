import triton_python_backend_utils as pb_utils

pb_utils.Logger.log_info("LOG-MARK logged at import time")  # LINE:import


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return responses
