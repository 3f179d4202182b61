"""OUT = soak_default(IN), asked through BLS."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            inner = pb_utils.InferenceRequest(
                model_name="soak_default",
                inputs=[pb_utils.get_input_tensor_by_name(r, "IN")],
                requested_output_names=["OUT"],
            ).exec()
            if inner.has_error():
                out.append(pb_utils.InferenceResponse(error=inner.error()))
            else:
                result = pb_utils.get_output_tensor_by_name(inner, "OUT")
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", result.as_numpy())]))
        return out
