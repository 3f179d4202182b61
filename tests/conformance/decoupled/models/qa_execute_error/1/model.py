import threading

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Each request is answered from its own thread: the first request of the batch with
    an error response (that also carries outputs), the others with their input."""

    def execute(self, requests):
        for index, request in enumerate(requests):
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            args = (request.get_response_sender(), index, data)
            threading.Thread(target=self.respond, args=args, daemon=True).start()
        return None

    def respond(self, sender, index, data):
        error = pb_utils.TritonError("An error occurred during execution") if index == 0 else None
        sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)], error=error))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
