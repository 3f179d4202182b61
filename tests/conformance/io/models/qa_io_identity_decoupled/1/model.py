import threading
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Answers from a thread after execute returned: the same response twice, then FINAL."""

    def initialize(self, args):
        self.threads = []

    def respond(self, sender, input0, flags):
        time.sleep(0.2)  # execute has returned by now
        output0 = pb_utils.Tensor.from_dlpack("OUTPUT0", input0.to_dlpack())
        following = pb_utils.Tensor("NEXT_GPU_OUTPUT", flags[1:])
        response = pb_utils.InferenceResponse([output0, following])
        for _ in range(2):
            sender.send(response)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def execute(self, requests):
        for request in requests:
            input0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            flags = pb_utils.get_input_tensor_by_name(request, "GPU_OUTPUT").as_numpy()
            thread = threading.Thread(
                target=self.respond,
                args=(request.get_response_sender(), input0, flags),
                daemon=True,
            )
            thread.start()
            self.threads.append(thread)
        return None

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=30)
