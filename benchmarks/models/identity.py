"""Identity: OUTPUT0 is INPUT0. Used for every tensor size, batching and 2 instances."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            output = pb_utils.Tensor("OUTPUT0", data)
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
