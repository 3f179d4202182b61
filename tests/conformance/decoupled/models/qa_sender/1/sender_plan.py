"""What the qa_sender models share: read a request's plan, send its responses.

A response's INDEX tells the client when it was made: 0 returned from execute, 1000 + i
sent before execute returned, 2000 + i sent after it returned (from a thread or a task).
A request of batch size n sums each input over its n rows and answers with n rows."""

from __future__ import annotations

import numpy as np

import triton_python_backend_utils as pb_utils

RETURNED, BEFORE, AFTER = 0, 1000, 2000
# Long enough for execute to have returned and the request to be released.
LATER_S = 0.2


def _total(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().sum()


def response(rows, index):
    data = np.full((rows, 1), index, np.uint16)
    return pb_utils.InferenceResponse([pb_utils.Tensor("INDEX", data)])


class Plan:
    def __init__(self, request):
        self.rows = pb_utils.get_input_tensor_by_name(request, "RETURN_A_RESPONSE").as_numpy()
        self.rows = self.rows.shape[0]
        self.before = int(_total(request, "NUMBER_OF_RESPONSE_BEFORE_RETURN"))
        self.final_before = bool(_total(request, "SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN"))
        self.returned = bool(_total(request, "RETURN_A_RESPONSE"))
        self.after = int(_total(request, "NUMBER_OF_RESPONSE_AFTER_RETURN"))
        self.final_after = bool(_total(request, "SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN"))
        needed = self.before or self.after or self.final_before or self.final_after
        self.sender = request.get_response_sender() if needed else None

    def send(self, count, base, final):
        for i in range(count):
            self.sender.send(response(self.rows, base + i))
        if final:
            self.sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def send_before(self):
        self.send(self.before, BEFORE, self.final_before)

    def send_after(self):
        self.send(self.after, AFTER, self.final_after)


def run(requests, schedule_after):
    """Plan every request, send what goes before the return, hand the rest to
    ``schedule_after`` and return the returned responses (None when there are none)."""
    plans = [Plan(request) for request in requests]
    for plan in plans:
        plan.send_before()
    schedule_after(plans)
    returned = [response(p.rows, RETURNED) if p.returned else None for p in plans]
    return None if all(r is None for r in returned) else returned
