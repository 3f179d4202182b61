import numpy as np

import triton_python_backend_utils as pb_utils


def try_as_numpy(tensor):
    """('ok:<dtype name>', array) when as_numpy() works, else ('<ExcType>:<message>', None)."""
    try:
        array = tensor.as_numpy()
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}", None
    return f"ok:{array.dtype.name}", array


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            seen, array = try_as_numpy(tensor)
            outputs = [
                pb_utils.Tensor.from_dlpack("OUT", tensor),
                pb_utils.Tensor("AS_NUMPY", np.array([seen.encode()], dtype=object)),
            ]
            if array is not None:
                # UV-39: a Tensor built from the ml_dtypes.bfloat16 array goes out as BF16.
                outputs.append(pb_utils.Tensor("OUT_NUMPY", array))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
