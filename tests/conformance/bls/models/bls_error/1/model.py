import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        error = pb_utils.TritonError("bls_error says no", pb_utils.TritonError.NOT_FOUND)
        return [pb_utils.InferenceResponse(error=error) for _ in requests]
