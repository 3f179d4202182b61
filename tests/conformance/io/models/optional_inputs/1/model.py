import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            names = [t.name() for t in request.inputs()]
            total = pb_utils.get_input_tensor_by_name(request, "A").as_numpy().copy()
            for name in ("B", "C"):
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    total += tensor.as_numpy()
            outputs = [
                pb_utils.Tensor("NAMES", np.array([n.encode() for n in names], dtype=object)),
                pb_utils.Tensor("SUM", total),
            ]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
