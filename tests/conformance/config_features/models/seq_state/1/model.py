"""OUT = STATE_OUT = STATE_IN + IN (the state Triton keeps between a sequence's requests);
the inputs it sees go to <model dir>/seen.txt."""

import os

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.record = os.path.join(args["model_repository"], "seen.txt")

    def execute(self, requests):
        responses = []
        for request in requests:
            names = sorted(t.name() for t in request.inputs())
            state = pb_utils.get_input_tensor_by_name(request, "STATE_IN")
            value = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            total = value if state is None else value + state.as_numpy()
            with open(self.record, "a") as record:
                record.write(f"{names} {total.tolist()}\n")
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", total), pb_utils.Tensor("STATE_OUT", total)]
                )
            )
        return responses
