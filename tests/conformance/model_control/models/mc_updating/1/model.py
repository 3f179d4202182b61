import os
import time

import numpy as np

import triton_python_backend_utils as pb_utils

# Outside the model repository: a file written inside a model's directory makes
# tritonserver see the model as changed, and a changed model is reloaded as a whole.
GATE_S = 30.0


def state_dir(args):
    repository = os.path.dirname(os.path.abspath(args["model_repository"]))
    return os.path.join(os.path.dirname(repository), "mc_updating_state")


def wait_while(path):
    """Blocks while the test keeps `path` (bounded: a stuck test still ends)."""
    deadline = time.monotonic() + GATE_S
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


class TritonPythonModel:
    """Writes one line per event to `events` (initialize, execute held, finalize: the
    instance name and pid). initialize waits while the file `init_gate` exists; an execute
    with HOLD=1 waits while `exec_gate` exists. WHO: the instance that answered."""

    def initialize(self, args):
        self.state = state_dir(args)
        self.name = args["model_instance_name"]
        self.note("init")
        wait_while(os.path.join(self.state, "init_gate"))

    def note(self, event):
        os.makedirs(self.state, exist_ok=True)
        # One write of a short line to an O_APPEND file: lines of several processes never mix.
        fd = os.open(os.path.join(self.state, "events"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{event} {self.name} {os.getpid()}\n".encode())
        finally:
            os.close(fd)

    def execute(self, requests):
        responses = []
        for request in requests:
            if pb_utils.get_input_tensor_by_name(request, "HOLD").as_numpy()[0] == 1:
                self.note("held")
                wait_while(os.path.join(self.state, "exec_gate"))
            who = np.array([self.name.encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("WHO", who)]))
        return responses

    def finalize(self):
        self.note("fini")
