import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily(
            name="pbconf_shared_total",
            description="One family, two instances",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.shared = self.family.Metric(labels={"model": args["model_name"]})
        self.own = self.family.Metric(labels={"instance": args["model_instance_name"]})
        self.shared.increment(1)
        self.own.increment(1)

    def execute(self, requests):
        responses = []
        for request in requests:
            value = float(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            self.shared.increment(value)
            self.own.increment(value)
            result = {"shared": self.shared.value(), "own": self.own.value()}
            encoded = np.array([json.dumps(result).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", encoded)]))
        return responses
