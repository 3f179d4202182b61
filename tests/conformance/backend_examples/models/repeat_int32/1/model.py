import json
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """python_backend's examples/decoupled repeat model, as its README describes it: one
    response per element of IN (OUT = IN[i], IDX = i), the i-th sent DELAY[i] ms after the
    previous one from a thread; execute returns after WAIT ms, possibly before the last."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                f"model {args['model_name']} needs the decoupled transaction policy"
            )
        self.out_dtype = pb_utils.triton_string_to_numpy(
            pb_utils.get_output_config_by_name(config, "OUT")["data_type"]
        )
        self.idx_dtype = pb_utils.triton_string_to_numpy(
            pb_utils.get_output_config_by_name(config, "IDX")["data_type"]
        )

    def execute(self, requests):
        if len(requests) != 1:
            raise pb_utils.TritonModelException(f"unsupported batch size {len(requests)}")
        request = requests[0]
        values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
        delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
        wait_ms = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0]
        threading.Thread(
            target=self.answer,
            args=(request.get_response_sender(), values, delays),
            daemon=True,
        ).start()
        time.sleep(wait_ms / 1000)
        return None

    def answer(self, sender, values, delays):
        for i, value in enumerate(values):
            time.sleep(delays[i] / 1000)
            outputs = [
                pb_utils.Tensor("IDX", np.array([i], self.idx_dtype)),
                pb_utils.Tensor("OUT", np.array([value], self.out_dtype)),
            ]
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
