"""INPUT0 back as OUTPUT0 (NVIDIA qa `restart`'s model). While the file named by
$RESTART_HANG_INIT_WHILE exists, initialize hangs (a restart that never comes up)."""

import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        flag = os.environ.get("RESTART_HANG_INIT_WHILE", "")
        while flag and os.path.exists(flag):
            time.sleep(0.05)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor(
                        "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
                    )
                ]
            )
            for r in requests
        ]
