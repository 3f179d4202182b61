import json

import numpy as np

import triton_python_backend_utils as pb_utils

BUCKETS = [0.5, 1.0, 2.5]


def outcome(action):
    try:
        value = action()
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"
    return f"ok:{value!r}"


class TritonPythonModel:
    def initialize(self, args):
        family = pb_utils.MetricFamily
        self.counter_family = family(
            name="pbconf_requests_total",
            description="Requests seen by the conformance model",
            kind=family.COUNTER,
        )
        self.gauge_family = family(
            name="pbconf_last_value", description="Last value seen", kind=family.GAUGE
        )
        self.histogram_family = family(
            name="pbconf_value_distribution", description="Values seen", kind=family.HISTOGRAM
        )
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.counter = self.counter_family.Metric(labels=labels)
        self.gauge = self.gauge_family.Metric(labels=labels)
        self.histogram = self.histogram_family.Metric(labels=labels, buckets=BUCKETS)
        self.other_counter = self.counter_family.Metric(labels={"model": "other"})

    def apply(self, values):
        for value in values:
            self.counter.increment(value)
            self.gauge.set(value)
            self.histogram.observe(value)
        self.other_counter.increment(1)
        return {
            "counter": self.counter.value(),
            "gauge": self.gauge.value(),
            "other": self.other_counter.value(),
        }

    def misuse(self, case):
        family = pb_utils.MetricFamily
        cases = {
            "labels_not_dict": lambda: self.counter_family.Metric(labels=["a"]),
            "histogram_without_buckets": lambda: self.histogram_family.Metric(labels={}),
            "counter_with_buckets": lambda: self.counter_family.Metric(labels={}, buckets=[1.0]),
            "gauge_with_buckets": lambda: self.gauge_family.Metric(labels={}, buckets=[1.0]),
            "buckets_not_list": lambda: self.histogram_family.Metric(labels={}, buckets=1.0),
            "counter_negative_increment": lambda: self.counter.increment(-1),
            "counter_set": lambda: self.counter.set(5),
            "counter_observe": lambda: self.counter.observe(5),
            "gauge_observe": lambda: self.gauge.observe(5),
            "gauge_negative_increment": lambda: self.gauge.increment(-1),
            "histogram_increment": lambda: self.histogram.increment(1),
            "histogram_set": lambda: self.histogram.set(1),
            "histogram_value": lambda: self.histogram.value(),
            "same_name_other_kind": lambda: family(
                name="pbconf_requests_total", description="x", kind=family.GAUGE
            ),
            "same_name_same_kind": lambda: (
                family(
                    name="pbconf_requests_total",
                    description="Requests seen by the conformance model",
                    kind=family.COUNTER,
                ).__class__.__name__
            ),
            "metric_of_deleted_family": self.metric_of_deleted_family,
            "kind_values": lambda: [int(family.COUNTER), int(family.GAUGE), int(family.HISTOGRAM)],
        }
        return outcome(cases[case])

    @staticmethod
    def metric_of_deleted_family():
        family = pb_utils.MetricFamily
        deleted = family(name="pbconf_deleted", description="deleted first", kind=family.COUNTER)
        orphan = deleted.Metric(labels={})
        del deleted
        return orphan.increment(1)

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            values = pb_utils.get_input_tensor_by_name(request, "VALUES").as_numpy()
            if mode == "apply":
                result = self.apply(values)
            else:
                result = self.misuse(mode[len("misuse:") :])
            encoded = np.array([json.dumps(result).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", encoded)]))
        return responses
