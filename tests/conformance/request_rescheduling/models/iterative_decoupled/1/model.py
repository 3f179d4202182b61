import threading

import numpy as np

import triton_python_backend_utils as pb_utils


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    """Each execution of a request sends one response (its step number) and reschedules
    the request until STEPS responses went out; the last one carries FINAL. The same
    request comes back, so its inputs and id are seen again.

    Two MODEs as NVIDIA's qa request_rescheduling_cases model: "final_first" sends a
    response and FINAL, then reschedules; "thread" reschedules and answers from a thread
    (STEPS-1 down to 0, then FINAL). Both do nothing when the request comes back."""

    def initialize(self, args):
        self.step = {}

    def execute(self, requests):
        for request in requests:
            steps = int(pb_utils.get_input_tensor_by_name(request, "STEPS").as_numpy()[0])
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            key = request.request_id()
            step = self.step.get(key, 0)
            sender = request.get_response_sender()
            if mode in ("final_first", "thread"):
                self.once(request, sender, mode, key, steps)
                continue
            if mode == "raise" and step == 1:
                self.step.pop(key, None)
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                raise ValueError("boom in the second iteration")
            if step + 1 < steps:
                self.step[key] = step + 1
                sender.send(out(step))
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            else:
                self.step.pop(key, None)
                sender.send(out(step), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def once(self, request, sender, mode, key, steps):
        if key in self.step:  # rescheduled: the work is done or going on in a thread
            del self.step[key]
            return
        self.step[key] = 1
        if mode == "final_first":
            sender.send(out(0))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            return
        request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
        threading.Thread(target=self.count_down, args=(sender, steps), daemon=True).start()

    @staticmethod
    def count_down(sender, steps):
        for value in range(steps - 1, -1, -1):
            sender.send(out(value))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
