import numpy as np

import triton_python_backend_utils as pb_utils


def fail(what):
    raise ValueError(f"{what} boom")  # LINE:fail


def reply(text):
    return pb_utils.InferenceResponse(
        [pb_utils.Tensor("MSG", np.array([text.encode()], np.object_))]
    )


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if mode == "raise":
                fail("decoupled")  # LINE:execute
            elif mode == "send_then_raise":
                sender.send(reply("first"))
                fail("decoupled")  # LINE:execute_after_send
            elif mode == "sender_closed":
                sender.send(reply("last"), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                sender.send(reply("too late"))  # LINE:sender
            else:
                sender.send(reply("ok"), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
