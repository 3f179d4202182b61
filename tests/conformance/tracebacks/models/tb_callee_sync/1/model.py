import triton_python_backend_utils as pb_utils


def fail(what):
    raise ValueError(f"{what} boom")  # LINE:fail


class TritonPythonModel:
    def execute(self, requests):
        fail("callee")  # LINE:execute
        return [pb_utils.InferenceResponse([]) for _ in requests]
