"""What request.trace().get_context() gives the model and, through BLS with
trace=request.trace(), the model it calls."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


def text(value):
    return pb_utils.Tensor("CTX", np.array([json.dumps(value).encode()], np.object_))


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            seen = {"own": request.trace().get_context()}
            if mode == "bls":
                call = pb_utils.InferenceRequest(
                    model_name="trace_context_leaf",
                    inputs=[pb_utils.get_input_tensor_by_name(request, "MODE")],
                    requested_output_names=["CTX"],
                    trace=request.trace(),
                )
                answer = call.exec()
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                ctx = pb_utils.get_output_tensor_by_name(answer, "CTX").as_numpy()[0]
                seen["leaf"] = json.loads(ctx)["own"]
            responses.append(pb_utils.InferenceResponse([text(seen)]))
        return responses
