import numpy as np

import triton_python_backend_utils as pb_utils


def try_as_numpy(tensor):
    """'ok:<dtype name>' when as_numpy() works, else '<ExcType>:<message>'."""
    try:
        return f"ok:{tensor.as_numpy().dtype.name}"
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            out = pb_utils.Tensor.from_dlpack("OUT", tensor)
            seen = np.array([try_as_numpy(tensor).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([out, pb_utils.Tensor("AS_NUMPY", seen)]))
        return responses
