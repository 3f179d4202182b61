"""A thread started when model.py is imported works for no instance: under
PYBACKEND_INSTANCE_PROCESS=shared its BLS call must fail saying so (not go nowhere), and so
must the call of a process that thread forks (OP 1), which has no route to any instance."""

import json
import os
import queue
import threading

import numpy as np

import triton_python_backend_utils as pb_utils

_jobs: "queue.Queue" = queue.Queue()


def _worker():
    while True:
        fn, answer = _jobs.get()
        try:
            answer.put(("ok", repr(fn())))
        except Exception as e:  # noqa: BLE001 - the answer is the error text
            answer.put(("error", str(e)))


threading.Thread(target=_worker, name="import-time-worker", daemon=True).start()


def _bls():
    return pb_utils.InferenceRequest(
        model_name="ident",
        requested_output_names=["OUT"],
        inputs=[pb_utils.Tensor("OP", np.array([0], np.int32))],
    ).exec()


def _bls_in_forked_child():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            try:
                text = "ok: " + repr(_bls())
            except Exception as e:  # noqa: BLE001 - the answer is the error text
                text = str(e)
            os.write(w, text.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    raise RuntimeError(text)


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            answer: "queue.Queue" = queue.Queue()
            op = int(pb_utils.get_input_tensor_by_name(request, "OP").as_numpy()[0])
            _jobs.put((_bls_in_forked_child if op == 1 else _bls, answer))
            status, text = answer.get(timeout=60)
            data = np.array([json.dumps({"status": status, "text": text})], dtype=np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return out
