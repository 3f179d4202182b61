import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils


def fail(what):
    raise ValueError(f"{what} boom")  # LINE:fail


def reply(text):
    return pb_utils.InferenceResponse(
        [pb_utils.Tensor("MSG", np.array([text.encode()], np.object_))]
    )


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0)
        mode = pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0].decode()
        if mode == "send_then_raise":
            # The sender is taken and used, then dropped with the coroutine's frame: its
            # client gets the traceback text all the same.
            requests[0].get_response_sender().send(reply("first"))
            fail("async decoupled")  # LINE:execute_after_send
        fail("async decoupled")  # LINE:execute
        return None
