import asyncio
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def identity_request(data):
    return pb_utils.InferenceRequest(
        model_name="qa_identity",
        requested_output_names=["OUTPUT0"],
        inputs=[pb_utils.Tensor("INPUT0", data)],
    )


def relayed(data, response):
    """The response to send for a BLS response: OUT, or an error that says what went wrong."""
    if response.has_error():
        return pb_utils.InferenceResponse(error=response.error().message())
    out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()
    if not np.array_equal(out, data):
        return pb_utils.InferenceResponse(error=f"BLS output {out} != input {data}")
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)])


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            for response in (
                identity_request(data).exec(),
                await identity_request(data).async_exec(),
            ):
                out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()
                if not np.array_equal(out, data):
                    raise pb_utils.TritonModelException(f"BLS output {out} != input {data}")
            sender = request.get_response_sender()
            first = threading.Thread(target=self.send_first, args=(sender, data), daemon=True)
            first.start()
            first.join()
            coroutine = self.send_last(sender, data)
            threading.Thread(target=asyncio.run, args=(coroutine,), daemon=True).start()
        return None

    def send_first(self, sender, data):
        sender.send(relayed(data, identity_request(data).exec()))

    async def send_last(self, sender, data):
        time.sleep(0.2)  # execute has returned by now
        response = await identity_request(data).async_exec()
        sender.send(relayed(data, response), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
