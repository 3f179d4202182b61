import json
import threading

import numpy as np

import triton_python_backend_utils as pb_utils


def result(value):
    out = np.array([json.dumps(value).encode()], np.object_)
    return pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", out)])


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().copy()
            sender = request.get_response_sender()
            threading.Thread(target=self.work, args=(x, sender), daemon=True).start()
        return None

    def work(self, x, sender):
        try:
            req = pb_utils.InferenceRequest(
                model_name="bls_identity",
                inputs=[pb_utils.Tensor("INPUT0", x)],
                requested_output_names=["OUTPUT1"],
            )
            r = req.exec()
            sender.send(result({"OUTPUT1": r.output_tensors()[0].as_numpy().tolist()}))
            stream = pb_utils.InferenceRequest(
                model_name="bls_stream",
                inputs=[
                    pb_utils.Tensor("COUNT", np.array([int(x[0])], np.int32)),
                    pb_utils.Tensor("DELAY_MS", np.array([1], np.int32)),
                ],
                requested_output_names=["OUT"],
            )
            for r in stream.exec(decoupled=True):
                outs = [t.as_numpy().tolist() for t in r.output_tensors()]
                sender.send(result({"streamed": outs}))
        except Exception as e:
            sender.send(result({"raised": str(e)}))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
