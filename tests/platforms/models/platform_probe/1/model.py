"""Reports the platform its stub runs on, and the length of each string it was sent (the
BYTES input decoded by the stub: the native helper where it loaded)."""

import json
import os
import platform
import sys

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        from pybackend.utils import native

        report = {
            "machine": platform.machine(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "byteorder": sys.byteorder,
            "native_helper": native.helpers is not None,
            "pid": os.getpid(),
        }
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXTS").as_numpy()
            lengths = np.array([len(t.decode("utf-8")) for t in texts], dtype=np.int64)
            report_array = np.array([json.dumps(report).encode()], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("REPORT", report_array), pb_utils.Tensor("LENGTHS", lengths)]
                )
            )
        return responses
