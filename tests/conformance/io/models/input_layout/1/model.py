import json

import numpy as np

import triton_python_backend_utils as pb_utils


def layout(array):
    """What model code relies on about an input array, and whether it can change it."""
    report = {
        "aligned": bool(array.flags.aligned),
        "on_itemsize": array.ctypes.data % array.itemsize == 0,
        "c_contiguous": bool(array.flags.c_contiguous),
        "writeable": bool(array.flags.writeable),
    }
    before = array.copy()
    array[...] = np.ones_like(array)  # in place, as a model normalizing its input does
    report["changed_in_place"] = bool((array == 1).all())
    array[...] = before
    return report


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            report = {t.name(): layout(t.as_numpy()) for t in request.inputs()}
            text = np.array([json.dumps(report, sort_keys=True).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", text)]))
        return responses
