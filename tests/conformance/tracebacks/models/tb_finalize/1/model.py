import numpy as np

import triton_python_backend_utils as pb_utils


def fail(what):
    raise RuntimeError(f"{what} boom")  # LINE:fail


class TritonPythonModel:
    def execute(self, requests):
        out = pb_utils.Tensor("MSG", np.array([b"ok"], np.object_))
        return [pb_utils.InferenceResponse([out]) for _ in requests]

    def finalize(self):
        fail("finalize")  # LINE:finalize
