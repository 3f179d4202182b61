import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "NUMBER_PARAMETERS").as_numpy()[0])
            params = json.loads(request.parameters())
            if n == 0:
                text = np.array([json.dumps(params)], dtype=np.object_)
                tensors = [pb_utils.Tensor("PARAMETERS_AGGREGATED", text)]
            else:
                params.update({f"bool_{n}": bool(n), f"int_{n}": n, f"str_{n}": str(n)})
                inner = pb_utils.InferenceRequest(
                    model_name="qa_bls_parameters",
                    inputs=[pb_utils.Tensor("NUMBER_PARAMETERS", np.array([n - 1], np.uint8))],
                    requested_output_names=["PARAMETERS_AGGREGATED"],
                    parameters=params,
                )
                tensors = inner.exec().output_tensors()
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
