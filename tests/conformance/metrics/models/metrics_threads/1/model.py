import json
import queue
import threading

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily(
            name="pbconf_thread_total",
            description="Incremented from threads",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.metrics = {}

        def create_in_thread():
            self.metrics["initialize"] = self.family.Metric(labels={"from": "initialize"})
            self.metrics["initialize"].increment(1)

        starter = threading.Thread(target=create_in_thread)
        starter.start()
        starter.join()
        self.metrics["execute"] = self.family.Metric(labels={"from": "execute"})
        self.jobs = queue.Queue()
        self.results = queue.Queue()
        threading.Thread(target=self.background, daemon=True).start()

    def background(self):
        metric = self.family.Metric(labels={"from": "background"})
        while True:
            value = self.jobs.get()
            try:
                metric.increment(value)
                self.results.put(metric.value())
            except Exception as exc:  # noqa: BLE001 - reported to the test
                self.results.put(f"{type(exc).__name__}: {exc}")

    def increment(self, which, value, times):
        for _ in range(times):
            self.metrics[which].increment(value)

    def execute(self, requests):
        responses = []
        for request in requests:
            value, threads = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            workers = [
                threading.Thread(target=self.increment, args=("execute", value, 25))
                for _ in range(int(threads))
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            self.jobs.put(value)
            result = {
                "execute": self.metrics["execute"].value(),
                "background": self.results.get(timeout=30),
                "initialize": self.metrics["initialize"].value(),
            }
            encoded = np.array([json.dumps(result).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", encoded)]))
        return responses
