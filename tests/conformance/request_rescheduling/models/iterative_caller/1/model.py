import json

import numpy as np

import triton_python_backend_utils as pb_utils


def describe(response):
    """One stream event: the step number, "final" for an empty response, or the error."""
    if response.has_error():
        return {"error": response.error().message()}
    tensor = pb_utils.get_output_tensor_by_name(response, "OUT")
    return "final" if tensor is None else int(tensor.as_numpy()[0])


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="iterative_decoupled",
                inputs=[
                    pb_utils.get_input_tensor_by_name(request, "MODE"),
                    pb_utils.get_input_tensor_by_name(request, "STEPS"),
                ],
                requested_output_names=["OUT"],
                # The callee keys its steps by request id: each caller's request its own.
                request_id=request.request_id(),
            )
            events = [describe(r) for r in call.exec(decoupled=True)]
            text = np.array([json.dumps(events).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("EVENTS", text)]))
        return responses
