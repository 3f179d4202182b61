import gc
import json
import weakref

import numpy as np

import triton_python_backend_utils as pb_utils


class Weights:
    """A model's state with a reference cycle (here a bound method kept on the object): only
    the cyclic collector frees it once the model drops it."""

    def __init__(self):
        self.data = np.ones(1 << 16)
        self.forward = self.run  # self -> bound method -> self

    def run(self):
        return self.data


class TritonPythonModel:
    def initialize(self, args):
        self.weights = Weights()
        self.first = weakref.ref(self.weights)
        self.refreshed = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            if mode == "refresh":
                self.weights = Weights()  # the weights of initialize are garbage now
                self.refreshed += 1
            gc.collect()
            report = {"refreshed": self.refreshed, "first_freed": self.first() is None}
            text = np.array([json.dumps(report).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", text)]))
        return responses
