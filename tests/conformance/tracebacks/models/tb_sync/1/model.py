import sys

import numpy as np

import triton_python_backend_utils as pb_utils


class Stop(BaseException):
    """A model's own exception class outside Exception."""


def fail(what):
    raise ValueError(f"{what} boom")  # LINE:fail


def ask(callee, mode):
    """A BLS call to ``callee``: the error text the caller sees."""
    inputs = [pb_utils.Tensor("MODE", np.array([mode.encode()], dtype=np.object_))]
    request = pb_utils.InferenceRequest(
        model_name=callee, inputs=inputs, requested_output_names=["MSG"]
    )
    response = request.exec()
    return response.error().message() if response.has_error() else "no error"


def reply(text):
    return pb_utils.InferenceResponse(
        [pb_utils.Tensor("MSG", np.array([text.encode()], np.object_))]
    )


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            if mode == "raise":
                fail("sync")  # LINE:execute
            elif mode == "sys_exit":
                sys.exit(3)  # LINE:exit
            elif mode == "interrupt":
                raise KeyboardInterrupt("stop")  # LINE:interrupt
            elif mode == "base_exception":
                raise Stop("custom")  # LINE:base
            elif mode == "bls_sync":
                responses.append(reply(ask("tb_callee_sync", "raise")))
            elif mode == "bls_async":
                responses.append(reply(ask("tb_callee_async", "raise")))
            elif mode == "bls_reraise":
                raise pb_utils.TritonModelException(ask("tb_callee_sync", "raise"))  # LINE:reraise
            else:
                responses.append(reply("ok"))
        return responses
