"""A projection layer whose two instances share one process and one copy of the weights.

config.pbtxt asks pybackend for PYBACKEND_INSTANCE_PROCESS "shared": both instances run in
one process, each on a thread of its own, and `pb_utils.shared` gives both the same weight
matrix, built by whichever instance initializes first. The same file runs unchanged under
NVIDIA's original backend, where each instance has a process and a matrix of its own.
"""

import os

import numpy as np

import triton_python_backend_utils as pb_utils

WIDTH = 2048  # FEATURES and PROJECTED rows have WIDTH values; the weights are WIDTH x WIDTH

# pb_utils.shared(key, factory) is a pybackend extension: one object per key and process.
# NVIDIA's original backend has no such function; there, calling the factory is the same
# thing, as every instance has a process of its own anyway.
load_once = getattr(pb_utils, "shared", None) or (lambda key, factory: factory())


def build_weights():
    """The weights, as a real model would read them from its checkpoint (here made up).

    RandomState's stream is frozen across numpy versions, so every process builds the same
    matrix. Its values are eighths in [-1, 1]: with inputs on a coarse grid too (quarters up
    to 16, say) every sum of products is exact in float32, so the answer does not depend on
    the BLAS, its threads or how requests were batched, and a client can check it bit for bit.
    """
    rng = np.random.RandomState(2048)
    weights = (rng.randint(-8, 9, size=(WIDTH, WIDTH)) / 8).astype(np.float32)
    # Under "shared" every instance's thread reads this one array, at the same time: no
    # instance may change it.
    weights.flags.writeable = False
    return weights


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        # Under "shared" the second instance waits for the first one's build, then gets the
        # very same array: the log lines of both instances name the same address.
        self.weights = load_once("weights", build_weights)
        # Each instance counts its own rows: one series per instance on /metrics. The family
        # is kept on self because its metrics must not outlive it.
        self.family = pb_utils.MetricFamily(
            name="shared_weights_rows_total",
            description="Rows projected by each instance of shared_weights",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.rows_served = self.family.Metric(
            labels={"model": args["model_name"], "instance_name": self.name}
        )
        pb_utils.Logger.log_info(
            f"{self.name}: weights of {self.weights.nbytes >> 20} MiB at "
            f"{id(self.weights):#x} in process {os.getpid()}"
        )

    def execute(self, requests):
        # The dynamic batcher hands over several requests at once: one product for all of
        # their rows. numpy releases the GIL meanwhile, so under "shared" the other
        # instance's thread computes its own batch at the same time.
        features = [
            pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            for request in requests
        ]
        projected = np.concatenate(features) @ self.weights
        responses, first = [], 0
        for rows in features:
            mine, first = projected[first : first + len(rows)], first + len(rows)
            shape = (len(rows), 1)
            outputs = [
                pb_utils.Tensor("PROJECTED", mine),
                pb_utils.Tensor("INSTANCE", np.full(shape, self.name.encode(), np.object_)),
                pb_utils.Tensor("PID", np.full(shape, os.getpid(), np.int64)),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        self.rows_served.increment(len(projected))
        return responses
