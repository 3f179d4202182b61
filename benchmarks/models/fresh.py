"""OUTPUT0 is a new array equal to INPUT0, as a model that computes its output returns one
(identity returns a view of the input, which no real model does): above 4 KiB it goes
through the stub's shared-memory arena, which the backend must hand back after copying."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            output = pb_utils.Tensor("OUTPUT0", data.copy())
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
