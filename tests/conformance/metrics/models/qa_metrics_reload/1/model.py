import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily(
            name="pbqa_reload_histogram",
            description="survives a reload",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        self.metric = self.family.Metric(labels={"model": "qa_metrics_reload"}, buckets=[1.0])

    def execute(self, requests):
        responses = []
        for _ in requests:
            self.metric.observe(0.5)
            out = pb_utils.Tensor("OUTPUT0", np.array([1.0], dtype=np.float32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
