import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        print("LOG-MARK unflushed print from execute")
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return responses

    def finalize(self):
        pb_utils.Logger.log_warn("LOG-MARK finalize log_warn")  # LINE:finalize
