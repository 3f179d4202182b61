import gc
import json

import numpy as np

import triton_python_backend_utils as pb_utils

BUCKETS = [0.1, 1.0, 2.5, 5.0, 10.0]


def outcome(action):
    try:
        value = action()
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"
    return f"ok:{value!r}"


class TritonPythonModel:
    def initialize(self, args):
        # Objects a mode leaves alive for the test to scrape, then the next mode to use.
        self.kept = {}

    def histogram_make(self):
        family = pb_utils.MetricFamily(
            name="pbqa_histogram", description="qa histogram", kind=pb_utils.MetricFamily.HISTOGRAM
        )
        self.kept["histogram"] = (family, family.Metric(labels={"k": "v"}, buckets=BUCKETS))
        return "made"

    def histogram_observe(self):
        _, metric = self.kept["histogram"]
        for value in (0.05, 1.5, 6.0):
            metric.observe(value)
            # As the qa model does: logging between metric calls (one channel in the original).
            pb_utils.Logger.log_info(f"qa_metrics observed {value}")
        return "observed"

    def histogram_args(self):
        family = pb_utils.MetricFamily(
            name="pbqa_histogram_args", description="args", kind=pb_utils.MetricFamily.HISTOGRAM
        )
        return {
            "no_buckets": outcome(lambda: family.Metric(labels={})),
            "buckets_none": outcome(lambda: family.Metric(labels={}, buckets=None)),
            "empty_list": outcome(lambda: type(family.Metric(labels={}, buckets=[])).__name__),
        }

    def histogram_bad_buckets(self, buckets):
        family = pb_utils.MetricFamily(
            name="pbqa_histogram_bad", description="bad", kind=pb_utils.MetricFamily.HISTOGRAM
        )
        return outcome(lambda: family.Metric(labels={}, buckets=buckets))

    def not_ascending(self):
        return self.histogram_bad_buckets([2.5, 0.1, 1.0, 10.0, 5.0])

    def duplicates(self):
        return self.histogram_bad_buckets([1, 1, 2, 5, 5])

    def dup_description(self):
        first = pb_utils.MetricFamily(
            name="pbqa_dup_desc",
            description="first description",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        second = pb_utils.MetricFamily(
            name="pbqa_dup_desc",
            description="second description",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        metric = second.Metric()
        del first
        gc.collect()
        self.kept["dup_description"] = (second, metric)
        return metric.value()

    def dup_family(self):
        first = pb_utils.MetricFamily(
            name="pbqa_dup_family",
            description="dup description",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        second = pb_utils.MetricFamily(
            name="pbqa_dup_family",
            description="dup description",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        one = first.Metric(labels={"custom_metric_key": "label1"})
        two = second.Metric(labels={"custom_metric_key": "label2"})
        self.kept["dup_family"] = (first, second, one, two)
        return [one.value(), two.value()]

    def dup_metric(self, labels, name):
        family = pb_utils.MetricFamily(
            name=name, description="dup metric", kind=pb_utils.MetricFamily.COUNTER
        )
        one, two = family.Metric(labels=labels), family.Metric(labels=labels)
        before = [one.value(), two.value()]
        one.increment(7.5)
        after = [one.value(), two.value()]
        del one
        gc.collect()
        self.kept[name] = (family, two)
        return {"before": before, "after": after}

    def dup_metric_labels(self):
        return self.dup_metric({"example1": "label1", "example2": "label2"}, "pbqa_dup_labels")

    def dup_metric_empty_labels(self):
        return self.dup_metric({}, "pbqa_dup_empty")

    def deleted_family(self):
        found = {}
        for kind_name in ("COUNTER", "GAUGE"):
            family = pb_utils.MetricFamily(
                name=f"pbqa_deleted_{kind_name.lower()}",
                description="deleted first",
                kind=getattr(pb_utils.MetricFamily, kind_name),
            )
            metric = family.Metric(labels={"example1": "label1"})
            del family
            gc.collect()
            calls = {"increment": lambda m=metric: m.increment(10), "value": metric.value}
            if kind_name == "GAUGE":
                calls["set"] = lambda m=metric: m.set(10)
            found[kind_name] = {call: outcome(action) for call, action in calls.items()}
        return found

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            encoded = np.array([json.dumps(getattr(self, mode)()).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", encoded)]))
        return responses
