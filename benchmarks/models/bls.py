"""Business logic scripting: one synchronous call to `bls_target` per request."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            call = pb_utils.InferenceRequest(
                model_name="bls_target",
                requested_output_names=["OUTPUT0"],
                inputs=[data],
            )
            result = call.exec()
            if result.has_error():
                raise pb_utils.TritonModelException(result.error().message())
            output = pb_utils.get_output_tensor_by_name(result, "OUTPUT0")
            out = pb_utils.Tensor("OUTPUT0", output.as_numpy())
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
