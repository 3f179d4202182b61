"""Ten responses per request (OUT = IN + k), then the final flag on its own."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            values = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            sender = r.get_response_sender()
            for k in range(10):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", values + k)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
