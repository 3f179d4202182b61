import gc
import json

import numpy as np

import triton_python_backend_utils as pb_utils


def outcome(action):
    try:
        value = action()
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"
    return f"ok:{value!r}"


class TritonPythonModel:
    def initialize(self, args):
        self.family = None
        self.metrics = {}

    def make(self):
        self.family = pb_utils.MetricFamily(
            name="pbconf_lifetime", description="Comes and goes", kind=pb_utils.MetricFamily.GAUGE
        )
        for key, value in (("a", 1.0), ("b", 2.0)):
            self.metrics[key] = self.family.Metric(labels={"key": key})
            self.metrics[key].set(value)
        return outcome(lambda: "made")

    def drop_metric(self):
        del self.metrics["a"]
        gc.collect()
        return outcome(lambda: self.metrics["b"].value())

    def drop_family(self):
        self.family = None
        gc.collect()
        return outcome(lambda: self.metrics["b"].set(5))

    def remake_other_kind(self):
        return outcome(self.remake)

    def remake(self):
        self.metrics.clear()
        other = pb_utils.MetricFamily(
            name="pbconf_lifetime", description="Now a counter", kind=pb_utils.MetricFamily.COUNTER
        )
        self.family = other
        self.metrics["c"] = other.Metric(labels={"key": "c"})
        self.metrics["c"].increment(3)
        return self.metrics["c"].value()

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            result = getattr(self, mode)()  # each mode says "ok:<value>" or "<Exc>:<message>"
            encoded = np.array([json.dumps(result).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", encoded)]))
        return responses
