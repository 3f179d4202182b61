"""Decoupled, several instances at once: each execute waits until every instance is in
execute (a module-level barrier: shared only when the instances share the process), then a
thread of its own makes a BLS call to `ident` and sends three responses naming the
instance. Odd instances answer from a Thread subclass that overrides run(), even ones from
Thread(target=...): a thread works for the instance that started it either way."""

import json
import threading

import numpy as np

import triton_python_backend_utils as pb_utils

_lock = threading.Lock()
_barrier = None


class _Answer(threading.Thread):
    def __init__(self, answer, *args):
        super().__init__()
        self._answer, self._args = answer, args

    def run(self):  # does not call Thread.run
        self._answer(*self._args)


class TritonPythonModel:
    def initialize(self, args):
        global _barrier
        self.name = args["model_instance_name"]
        config = json.loads(args["model_config"])
        count = sum(int(g.get("count", 1)) for g in config.get("instance_group", []))
        with _lock:
            if _barrier is None:
                _barrier = threading.Barrier(count, timeout=60.0)

    def execute(self, requests):
        for request in requests:
            try:
                _barrier.wait()
                together = True
            except threading.BrokenBarrierError:
                together = False
            sender = request.get_response_sender()
            if int(self.name.rsplit("_", 1)[1]) % 2:
                _Answer(self._answer, sender, together).start()
            else:
                threading.Thread(target=self._answer, args=(sender, together)).start()
        return None

    def _answer(self, sender, together):
        bls = pb_utils.InferenceRequest(
            model_name="ident",
            requested_output_names=["OUT"],
            inputs=[pb_utils.Tensor("OP", np.array([0], np.int32))],
        ).exec()
        if bls.has_error():
            callee = "error: " + bls.error().message()
        else:
            out = pb_utils.get_output_tensor_by_name(bls, "OUT").as_numpy()[0]
            callee = json.loads(out)["args"]["model_instance_name"]
        for i in range(3):
            text = json.dumps(
                {"instance": self.name, "i": i, "together": together, "callee": callee}
            )
            sender.send(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([text], dtype=np.object_))]
                )
            )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
