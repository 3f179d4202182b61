"""OUTPUT PID = what `chaos` answers to this request's CMD, through one blocking BLS call."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="chaos",
                inputs=[pb_utils.get_input_tensor_by_name(request, "CMD")],
                requested_output_names=["PID"],
            )
            result = call.exec()
            if result.has_error():
                raise pb_utils.TritonModelException(result.error().message())
            pid = pb_utils.get_output_tensor_by_name(result, "PID").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PID", pid)]))
        return responses
