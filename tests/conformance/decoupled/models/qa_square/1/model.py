import threading

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            args = (request.get_response_sender(), data)
            threading.Thread(target=self.respond, args=args, daemon=True).start()
        return None

    def respond(self, sender, data):
        for _ in range(int(data[0])):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
