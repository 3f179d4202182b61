import os

import numpy as np

import triton_python_backend_utils as pb_utils

CODE_NAMES = [
    "UNKNOWN",
    "INTERNAL",
    "NOT_FOUND",
    "INVALID_ARG",
    "UNAVAILABLE",
    "UNSUPPORTED",
    "ALREADY_EXISTS",
    "CANCELLED",
]


def ok_response(value=1):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


def msg_response(text):
    msg = np.array([text.encode()], dtype=object)
    return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", msg)])


def try_send(sender, *args, **kwargs):
    """Returns '' on success, else the exception type and message."""
    try:
        sender.send(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"
    return ""


class TritonPythonModel:
    def initialize(self, args):
        # Outcomes that cannot travel in the (already sent) response go to files here.
        self.report_dir = os.path.join(args["model_repository"], "reports")
        os.makedirs(self.report_dir, exist_ok=True)

    def report(self, name, text):
        path = os.path.join(self.report_dir, name + ".txt")
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    def execute(self, requests):
        modes = [
            pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0].decode() for r in requests
        ]
        mode = modes[0]
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        if mode == "too_many":
            return [ok_response() for _ in requests] + [ok_response()]
        if mode == "too_few":
            return []
        if mode == "tuple":
            return tuple(ok_response() for _ in requests)
        if mode == "not_response":
            return ["not a response" for _ in requests]
        if mode == "raise":
            raise ValueError("boom from execute")  # LINE:raise
        if mode == "raise_model_exception":
            raise pb_utils.TritonModelException("model says no")  # LINE:raise_model_exception
        if mode == "none_list_without_send":
            return [None for _ in requests]
        if mode == "return_none_without_send":
            return None
        responses = []
        for request, mode in zip(requests, modes):
            sender = request.get_response_sender()
            if mode == "ok":
                responses.append(ok_response(7))
            elif mode.startswith("error_code_"):
                # pb_utils.TritonError only exists once the stub has set up pb_utils, so
                # (like users of the original) it is looked up here, not at import time.
                code = getattr(pb_utils.TritonError, mode[len("error_code_") :])
                error = pb_utils.TritonError(f"failed with {mode[11:]}", code)
                responses.append(pb_utils.InferenceResponse(error=error))
            elif mode == "code_text":
                # pb_utils' enums as a log line or a message prints them (the original's are
                # pybind11 enums): error codes, log levels, metric kinds, memory types.
                codes = [getattr(pb_utils.TritonError, name) for name in CODE_NAMES]
                codes += [getattr(pb_utils.Logger, n) for n in ("INFO", "WARNING", "ERROR")]
                codes += [pb_utils.Logger.VERBOSE, pb_utils.MetricFamily.COUNTER]
                codes += [pb_utils.MetricFamily.GAUGE, pb_utils.MetricFamily.HISTOGRAM]
                codes += [pb_utils.TRITONSERVER_MEMORY_GPU, pb_utils.TRITONSERVER_MEMORY_CPU]
                lines = [
                    f"{c!r} {c} {str(c)} {format(c, '')} {bool(c)} {c == int(c)}" for c in codes
                ]
                responses.append(msg_response("\n".join(lines)))
            elif mode == "error_default_code":
                error = pb_utils.TritonError("failed with the default code")
                responses.append(pb_utils.InferenceResponse(error=error))
            elif mode == "error_with_outputs":
                error = pb_utils.TritonError(
                    "outputs are ignored", pb_utils.TritonError.INVALID_ARG
                )
                out = pb_utils.Tensor("OUT", np.array([5], np.int32))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out], error=error))
            elif mode == "send_final_with_response":
                sender.send(ok_response(11), flags=final)
                responses.append(None)
            elif mode == "send_then_final":
                sender.send(ok_response(12))
                sender.send(flags=final)
                responses.append(None)
            elif mode == "send_final_first":
                first = try_send(sender, flags=final)
                sender.send(msg_response(first), flags=final)
                responses.append(None)
            elif mode == "send_twice":
                sender.send(ok_response(13))
                second = try_send(sender, msg_response("second"))
                sender.send(flags=final)
                self.report("send_twice", second)
                responses.append(None)
            elif mode == "send_after_final":
                sender.send(ok_response(14), flags=final)
                late = try_send(sender, msg_response("late"), flags=final)
                self.report("send_after_final", late)
                responses.append(None)
            elif mode == "send_then_return":
                sender.send(ok_response(15), flags=final)
                responses.append(ok_response(16))
            else:
                raise ValueError(f"unknown mode {mode}")
        return responses
