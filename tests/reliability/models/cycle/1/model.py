"""BLS along PATH: the first name in PATH is called (blocking exec) with the rest of PATH;
an empty PATH answers "leaf <model>". A name may carry the call's timeout in microseconds
("name@1000000"). A failed call answers "error: <its message>", so a refused cycle shows its
text to the client."""

import numpy as np

import triton_python_backend_utils as pb_utils


def answer(text):
    return pb_utils.InferenceResponse(
        [pb_utils.Tensor("MSG", np.array([text.encode()], np.object_))]
    )


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            path = pb_utils.get_input_tensor_by_name(request, "PATH").as_numpy()[0].decode()
            if not path:
                responses.append(answer(f"leaf {self.name}"))
                continue
            callee, _, rest = path.partition(",")
            callee, _, timeout = callee.partition("@")
            call = pb_utils.InferenceRequest(
                model_name=callee,
                inputs=[pb_utils.Tensor("PATH", np.array([rest.encode()], np.object_))],
                requested_output_names=["MSG"],
                timeout=int(timeout or 0),
            )
            result = call.exec()
            if result.has_error():
                responses.append(answer("error: " + result.error().message()))
            else:
                msg = pb_utils.get_output_tensor_by_name(result, "MSG").as_numpy()[0].decode()
                responses.append(answer(msg))
        return responses
