import asyncio
import sys
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
        return pb_utils.InferenceResponse(error=response.error())
    out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()
    if not np.array_equal(out, data):
        error = pb_utils.TritonError(f"BLS output {out} != input {data}")
        return pb_utils.InferenceResponse(error=error)
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)])


def dlpack_add_sub_problems():
    """The CPU half of the qa model's GPU BLS check: the outputs on the CPU and right, and
    to_dlpack() holding one reference to an output for as long as its capsule lives."""
    a = np.random.rand(16).astype(np.float32)
    b = np.random.rand(16).astype(np.float32)
    request = pb_utils.InferenceRequest(
        model_name="qa_add_sub",
        inputs=[pb_utils.Tensor("INPUT0", a), pb_utils.Tensor("INPUT1", b)],
        requested_output_names=["OUTPUT0", "OUTPUT1"],
    )
    response = request.exec()
    if response.has_error():
        return [response.error().message()]
    problems = []
    for name, want in (("OUTPUT0", a + b), ("OUTPUT1", a - b)):
        out = pb_utils.get_output_tensor_by_name(response, name)
        if not out.is_cpu():
            problems.append(f"{name} is not on the CPU")
        before = sys.getrefcount(out)
        capsule = out.to_dlpack()
        held = sys.getrefcount(out) - before
        del capsule
        left = sys.getrefcount(out) - before
        if (held, left) != (1, 0):
            problems.append(f"{name}: to_dlpack() adds {held} references, {left} left after")
        if not np.array_equal(np.from_dlpack(out), want):
            problems.append(f"{name} is {out.as_numpy()}, expected {want}")
    return problems


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
        problems = dlpack_add_sub_problems()
        if problems:
            error = pb_utils.TritonError("; ".join(problems))
            sender.send(pb_utils.InferenceResponse(error=error))
        else:
            sender.send(relayed(data, identity_request(data).exec()))

    async def send_last(self, sender, data):
        time.sleep(0.2)  # execute has returned by now
        response = await identity_request(data).async_exec()
        sender.send(relayed(data, response), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
