"""A model that misbehaves on command, for the reliability tests.

CMD (one string) says what to do:
  ok               answer PID = the stub's pid
  exit:N           os._exit(N)
  kill:N           send signal N to its own process
  segv             dereference NULL (a real segmentation fault)
  block:PATH       create PATH (so the test knows execute is running), then sleep 60 s
  hang             wait forever
  orphan:CMD       start a child that keeps the stub's stdout/stderr open, then CMD
In decoupled mode, "send:K;CMD" first sends K responses, and "thread:CMD" returns from
execute at once and does CMD from a thread after sending one response.
Before anything fatal it prints a line to stderr that the backend must report.
initialize exits with code 9 while the file named by $CHAOS_FAIL_INIT_WHILE exists.
"""

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def _pid_response():
    pid = np.array([os.getpid()], dtype=np.int64)
    return pb_utils.InferenceResponse([pb_utils.Tensor("PID", pid)])


def _act(cmd):
    """Carry out cmd; returns only for the harmless commands."""
    if cmd == "ok":
        return
    if cmd.startswith("block:"):
        with open(cmd[len("block:") :], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
        return
    print(f"chaos {os.getpid()}: about to {cmd}", file=sys.stderr, flush=True)
    if cmd.startswith("orphan:"):
        # A child that inherits stdout/stderr keeps the stub's pipes open after it dies.
        child = subprocess.Popen(["sleep", "30"])
        print(f"chaos {os.getpid()}: child {child.pid}", file=sys.stderr, flush=True)
        _act(cmd[len("orphan:") :])
    if cmd.startswith("exit:"):
        os._exit(int(cmd[len("exit:") :]))
    if cmd.startswith("kill:"):
        os.kill(os.getpid(), int(cmd[len("kill:") :]))
        time.sleep(10)  # a catchable signal may take a moment
    if cmd == "segv":
        ctypes.string_at(0)
    if cmd == "hang":
        threading.Event().wait()
    raise pb_utils.TritonModelException(f"unknown command {cmd!r}")


class TritonPythonModel:
    def initialize(self, args):
        # While the file named by this variable exists, initialize dies (restart tests).
        flag = os.environ.get("CHAOS_FAIL_INIT_WHILE", "")
        if flag and os.path.exists(flag):
            print(f"chaos {os.getpid()}: initialize dies", file=sys.stderr, flush=True)
            os._exit(9)
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(
            __import__("json").loads(args["model_config"])
        )
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def execute(self, requests):
        if not self.decoupled:
            out = []
            for request in requests:
                cmd = pb_utils.get_input_tensor_by_name(request, "CMD").as_numpy()[0].decode()
                _act(cmd)
                out.append(_pid_response())
            return out
        for request in requests:
            cmd = pb_utils.get_input_tensor_by_name(request, "CMD").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if cmd.startswith("thread:"):
                threading.Thread(target=self._later, args=(sender, cmd[7:]), daemon=True).start()
                continue
            if cmd.startswith("send:"):
                count, cmd = cmd[len("send:") :].split(";", 1)
                for _ in range(int(count)):
                    sender.send(_pid_response())
            _act(cmd)
            sender.send(_pid_response(), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def _later(self, sender, cmd):
        sender.send(_pid_response())
        time.sleep(0.2)
        _act(cmd)
        sender.send(_pid_response(), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
