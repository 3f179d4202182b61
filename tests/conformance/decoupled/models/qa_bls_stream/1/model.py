import threading

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            args = (request.get_response_sender(), data)
            threading.Thread(target=self.relay, args=args, daemon=True).start()
        return None

    def relay(self, sender, data):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        bls = pb_utils.InferenceRequest(
            model_name="qa_square",
            requested_output_names=["OUT"],
            inputs=[pb_utils.Tensor("IN", data)],
        )
        count = 0
        for response in bls.exec(decoupled=True):
            count += 1
            if response.has_error():
                sender.send(pb_utils.InferenceResponse(error=response.error()), final)
                return
            if response.output_tensors():
                out = pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()
                if not np.array_equal(out, data):
                    error = pb_utils.TritonError(f"BLS output {out} != input {data}")
                    sender.send(pb_utils.InferenceResponse(error=error), final)
                    return
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        # The stream ends with an empty final response after the data[0] responses.
        if count - 1 != int(data[0]):
            error = pb_utils.TritonError(f"expected {int(data[0])} responses, got {count - 1}")
            sender.send(pb_utils.InferenceResponse(error=error), final)
        else:
            sender.send(flags=final)
