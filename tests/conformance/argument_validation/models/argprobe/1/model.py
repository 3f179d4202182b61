"""Calls its response sender's send() with one argument of the matrix varied; CASE is
"<argument>|<value name>", or "report" for the outcome of the previous case."""

import importlib.util
import pathlib

import numpy as np

import triton_python_backend_utils as pb_utils


def _common(repository):
    path = pathlib.Path(repository).parent / "argmatrix" / "1" / "matrix_common.py"
    spec = importlib.util.spec_from_file_location("argmatrix_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _response(text):
    tensor = pb_utils.Tensor("OUTCOME", np.array([text.encode()], dtype=object))
    return pb_utils.InferenceResponse([tensor])


class TritonPythonModel:
    def initialize(self, args):
        self.common = _common(args["model_repository"])
        self.last = "no case run"

    def execute(self, requests):
        for request in requests:
            case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if case == "report":
                sender.send(
                    _response(self.last), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
                continue
            argument, value_name = case.split("|")
            valid = {"response": _response("sent by the case"), "flags": 0}
            kwargs = dict(valid)
            kwargs[argument] = self.common.VALUES[value_name](valid[argument])
            self.last = self.common.outcome(lambda s=sender, kw=kwargs: s.send(**kw))
            try:  # the case may have closed the stream itself (flags=FINAL)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except pb_utils.TritonModelException:
                pass
        return None
