"""Instances sharing a process (tests/instances): every instance reports who it is; the
module-level state below is what the instances of one process share.

OP (INT32 [1]) picks what execute does; OUT (STRING [1]) is a JSON answer."""

import ctypes
import json
import os
import socket
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils
from pybackend.utils import transport

# One line per import of this module, with the importing pid (fork: imported once).
with open(os.path.join(os.path.dirname(__file__), "imports.log"), "a") as _f:
    _f.write(f"{os.getpid()}\n")

_lock = threading.Lock()
_waiting = 0  # executes parked in OP_PARK
_never = threading.Event()
_quitting = threading.Event()  # OP_QUIT is about to end its instance's thread
_builds = 0  # calls of the pb_utils.shared factory in this process
_barrier = None

OP_IDENT, OP_BARRIER, OP_EXIT, OP_SEGV, OP_HANG, OP_SHARED, OP_PARK, OP_QUIT, OP_OUTLIVE = range(9)
BOUND_S = 60.0  # no wait here is unbounded


def _build():
    global _builds
    with _lock:
        _builds += 1
    return object()


def _count(config):
    return sum(int(g.get("count", 1)) for g in config.get("instance_group", []))


class TritonPythonModel:
    def initialize(self, args):
        global _barrier
        self.args = dict(args)
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        fail = params.get("FAIL_INIT", {}).get("string_value", "")
        if fail and fail == args["model_instance_name"]:
            raise ValueError(f"initialize refused by FAIL_INIT for {fail}")
        # BARRIER_S: a server with a short execute-timeout-seconds needs a shorter wait.
        bound = float(params.get("BARRIER_S", {}).get("string_value", BOUND_S))
        with _lock:
            if _barrier is None:
                _barrier = threading.Barrier(_count(config), timeout=bound)
        self.thread = threading.get_ident()

    def execute(self, requests):
        global _waiting
        out = []
        for request in requests:
            op = int(pb_utils.get_input_tensor_by_name(request, "OP").as_numpy()[0])
            answer = {
                "args": {k: v for k, v in self.args.items() if k != "model_config"},
                "pid": os.getpid(),
                "init_thread": self.thread,
                "thread": threading.get_ident(),
            }
            if op == OP_BARRIER:
                try:
                    answer["barrier"] = _barrier.wait()
                except threading.BrokenBarrierError:
                    answer["barrier"] = "broken"
                    _barrier.reset()  # a broken barrier stays broken: the next try starts anew
            elif op == OP_EXIT:
                self._wait_parked()
                os._exit(7)
            elif op == OP_SEGV:
                self._wait_parked()
                ctypes.string_at(0)
            elif op == OP_HANG:
                time.sleep(BOUND_S)
            elif op == OP_SHARED:
                answer["shared"] = id(pb_utils.shared("obj", _build))
                answer["builds"] = _builds
            elif op == OP_PARK:
                with _lock:
                    _waiting += 1
                    # Seen by a test that kills the process once every instance is parked.
                    with open(os.path.join(os.path.dirname(__file__), "parked.log"), "a") as f:
                        f.write(f"{self.args['model_instance_name']}\n")
                _never.wait(BOUND_S)
            elif op == OP_QUIT:
                # Ends the stub loop of this instance (its process under own, its thread
                # under shared), not the process: its channels break, as when the backend's
                # end of them goes. (sys.exit() is only that batch's error, as on the
                # original.) Fault injection through the stub's own state.
                _quitting.set()
                instance_transport = transport.get_transport()  # shared: routes per thread
                current = getattr(instance_transport, "current", None)
                sync = (current() if current else instance_transport).state.sync
                sync.lane = None  # the answer goes to the broken socket, not shared memory
                channel = socket.socket(fileno=sync.fileno())
                channel.shutdown(socket.SHUT_RDWR)
                channel.detach()
            elif op == OP_OUTLIVE:
                # In flight while another instance's OP_QUIT ends its thread: answers a
                # moment after it, when the backend has long seen that instance end.
                _quitting.wait(BOUND_S)
                time.sleep(1.0)
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([json.dumps(answer)], dtype=np.object_))]
                )
            )
        return out

    def finalize(self):
        # One line per finalize, "<instance> <pid>": a test that changes the instance count
        # checks that every instance it replaced was finalized, in its own process.
        with open(os.path.join(os.path.dirname(__file__), "finalized.log"), "a") as f:
            f.write(f"{self.args['model_instance_name']} {os.getpid()}\n")

    def _wait_parked(self):
        """The crash waits until every other instance is inside execute (OP_PARK)."""
        deadline = time.monotonic() + BOUND_S
        want = _barrier.parties - 1
        while time.monotonic() < deadline:
            with _lock:
                if _waiting >= want:
                    return
            time.sleep(0.01)
