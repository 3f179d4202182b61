"""A model whose execute() raises; the client gets the message, the server stays healthy."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        values = pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy()
        raise ValueError(f"error_model refuses every request (first one had {values.size} values)")
