import json

import numpy as np

import triton_python_backend_utils as pb_utils


def call(decoupled):
    empty = np.zeros([1, 0], dtype=np.float32)
    request = pb_utils.InferenceRequest(
        model_name="qa_identity_fp32",
        inputs=[pb_utils.Tensor("INPUT0", empty)],
        requested_output_names=["OUTPUT0"],
    )
    if decoupled:
        responses = list(request.exec(decoupled=True))
    else:
        responses = [request.exec()]
    found = {"responses": len(responses), "errors": [], "shapes": []}
    for response in responses:
        if response.has_error():
            found["errors"].append(response.error().message())
        output = pb_utils.get_output_tensor_by_name(response, "OUTPUT0")
        if output is not None:
            found["shapes"].append(list(output.as_numpy().shape))
    return found


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            decoupled = bool(pb_utils.get_input_tensor_by_name(request, "DECOUPLED").as_numpy()[0])
            report = np.array([json.dumps(call(decoupled)).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", report)]))
        return responses
