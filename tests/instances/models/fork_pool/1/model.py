"""BLS from forked workers of every instance at once: each execute waits until every
instance is in execute (a module-level barrier: shared only when the instances share the
process), then a multiprocessing 'fork' Pool's workers each call `ident` with exec(). The
answer names the instance, its pid, and each worker's pid and callee (or error).

OP (INT32 [1]) is ignored; OUT (STRING [1]) is the JSON answer."""

import json
import multiprocessing
import os
import threading

import numpy as np

import triton_python_backend_utils as pb_utils

WORKERS = 3
# A worker whose call hangs (no route to the server) fails the answer after this, instead of
# holding the request until the client gives up.
BOUND_S = 30.0

_lock = threading.Lock()
_barrier = None


def _sockets():
    """The sockets this process holds: a worker should hold its route to the parent only."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own fd
        if link.startswith("socket:"):
            found.append(int(fd))
    return sorted(found)


def call_ident(_):
    sockets = _sockets()
    response = pb_utils.InferenceRequest(
        model_name="ident",
        requested_output_names=["OUT"],
        inputs=[pb_utils.Tensor("OP", np.array([0], np.int32))],
    ).exec()
    if response.has_error():
        return {"pid": os.getpid(), "sockets": sockets, "error": response.error().message()}
    out = pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()[0]
    callee = json.loads(out)["args"]["model_instance_name"]
    return {"pid": os.getpid(), "sockets": sockets, "callee": callee}


class TritonPythonModel:
    def initialize(self, args):
        global _barrier
        self.name = args["model_instance_name"]
        config = json.loads(args["model_config"])
        count = sum(int(g.get("count", 1)) for g in config.get("instance_group", []))
        with _lock:
            if _barrier is None:
                _barrier = threading.Barrier(count, timeout=BOUND_S)

    def execute(self, requests):
        out = []
        for _request in requests:
            try:
                _barrier.wait()
                together = True
            except threading.BrokenBarrierError:
                together = False
                _barrier.reset()
            answer = {"instance": self.name, "pid": os.getpid(), "together": together}
            with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
                pending = pool.map_async(call_ident, range(WORKERS))
                try:
                    answer["workers"] = pending.get(BOUND_S)
                except multiprocessing.TimeoutError:
                    answer["workers"] = f"no answer from the workers within {BOUND_S} s"
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([json.dumps(answer)], dtype=np.object_))]
                )
            )
        return out
