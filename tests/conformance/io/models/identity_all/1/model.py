import json

import numpy as np

import triton_python_backend_utils as pb_utils


def describe(tensor, array):
    """What the model saw, so the test can check the input side exactly."""
    flat = array.reshape(-1)
    return {
        "name": tensor.name(),
        "shape": list(tensor.shape()),
        "is_cpu": tensor.is_cpu(),
        "numpy_dtype": array.dtype.str,
        "numpy_shape": list(array.shape),
        "element_types": sorted({type(x).__name__ for x in flat}) if array.dtype == object else [],
        "c_contiguous": bool(array.flags["C_CONTIGUOUS"]),
        "writeable": bool(array.flags["WRITEABLE"]),
    }


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs, info = [], []
            for tensor in request.inputs():
                array = tensor.as_numpy()
                info.append(describe(tensor, array))
                outputs.append(pb_utils.Tensor("OUT" + tensor.name()[2:], array))
            encoded = np.array([json.dumps(info).encode()], dtype=np.object_)
            outputs.append(pb_utils.Tensor("INFO", encoded))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
