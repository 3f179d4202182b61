"""What SIGTERM and SIGINT do to the stub and to what the model starts. CMD: "pid" (the
process serving it), "children" (how a forked worker and a started program end on each
signal, as JSON), "sleep:<s>" (answers "slept" after that long). finalize() leaves a file in
$STOP_SIGNALS_DIR when the server has one."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def _sleep() -> None:
    time.sleep(30)


def _forked_worker_fate(sig: int) -> str:
    worker = multiprocessing.get_context("fork").Process(target=_sleep)
    worker.start()
    time.sleep(0.3)
    os.kill(worker.pid, sig)
    worker.join(3)
    if worker.is_alive():
        worker.kill()
        worker.join()
        return "survived"
    return f"ended {worker.exitcode}"


def _program_fate(sig: int) -> str:
    program = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    time.sleep(0.5)  # past the interpreter's start, which sets up its own SIGINT handler
    program.send_signal(sig)
    try:
        return f"ended {program.wait(5)}"
    except subprocess.TimeoutExpired:
        program.kill()
        program.wait()
        return "survived"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            cmd = pb_utils.get_input_tensor_by_name(request, "CMD").as_numpy()[0].decode()
            if cmd == "pid":
                out = str(os.getpid())
            elif cmd == "children":
                fates = {}
                for name in ("SIGTERM", "SIGINT"):
                    sig = getattr(signal, name)
                    fates[f"forked {name}"] = _forked_worker_fate(sig)
                    fates[f"program {name}"] = _program_fate(sig)
                out = json.dumps(fates)
            elif cmd.startswith("sleep:"):
                time.sleep(float(cmd[len("sleep:") :]))
                out = "slept"
            else:
                raise pb_utils.TritonModelException(f"unknown CMD {cmd!r}")
            tensor = pb_utils.Tensor("OUT", np.array([out.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([tensor]))
        return responses

    def finalize(self):
        where = os.environ.get("STOP_SIGNALS_DIR")
        if where:
            with open(os.path.join(where, f"finalized-{os.getpid()}"), "w") as f:
                f.write("finalized")
