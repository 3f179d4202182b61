import json
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """python_backend's examples/decoupled square model, as its README describes it: a
    request with IN = [n] gets n responses, each OUT = [n], sent from a thread after
    execute has returned, then the sender is closed."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                f"model {args['model_name']} needs the decoupled transaction policy"
            )
        self.lock = threading.Lock()
        self.running = 0

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            with self.lock:
                self.running += 1
            threading.Thread(
                target=self.answer, args=(request.get_response_sender(), n), daemon=True
            ).start()
        return None

    def answer(self, sender, n):
        for _ in range(n):
            out = pb_utils.Tensor("OUT", np.array([n], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        with self.lock:
            self.running -= 1

    def finalize(self):
        # Wait for the threads still sending, as the example does.
        while True:
            with self.lock:
                if self.running == 0:
                    return
            time.sleep(0.1)
