import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """python_backend's examples/bls_decoupled sync model: IN goes to the decoupled
    square_int32 with exec(decoupled=True); SUM adds up the OUT of every response."""

    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="square_int32",
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"],
            )
            total = np.zeros(1, dtype=np.int32)
            for response in call.exec(decoupled=True):
                if response.has_error():
                    raise pb_utils.TritonModelException(response.error().message())
                out = pb_utils.get_output_tensor_by_name(response, "OUT")
                if out is not None:  # the last response only carries the FINAL flag
                    total += out.as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", total)]))
        return responses
