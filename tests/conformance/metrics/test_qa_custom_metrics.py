"""NVIDIA's qa L0_backend_python/custom_metrics cases not covered by test_custom_metrics.py:
histogram series and bucket arguments, families and metrics made twice, metrics of a deleted
family, and a histogram shared by three instances through a reload (docs/qa_coverage.md)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer, text_output
from conformance_support.control import load, unload
from conformance_support.metrics_endpoint import family_lines, key, samples, scrape

DELETED = (
    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The "
    "'MetricFamily' object should be deleted AFTER its corresponding 'Metric' objects have "
    "been deleted."
)


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit", load_models=["qa_metrics"]) as srv:
        yield srv


def run(server, mode: str) -> object:
    reply = infer(server, "http", "qa_metrics", {"MODE": bytes_input(mode)})
    return json.loads(text_output(reply, "RESULT"))


def test_histogram_series_before_and_after_observe(server):
    """qa test_histogram_e2e: every bucket, the sum and the count exist at 0 as soon as the
    metric is made; three observations land in the cumulative buckets; Logger calls between
    them reach the log."""
    name, labels = "pbqa_histogram", {"k": "v"}
    bounds = ["0.1", "1", "2.5", "5", "10", "+Inf"]
    assert run(server, "histogram_make") == "made"
    expected = {key(f"{name}_bucket", le=le, **labels): 0.0 for le in bounds}
    expected |= {key(f"{name}_count", **labels): 0.0, key(f"{name}_sum", **labels): 0.0}
    assert samples(scrape(server), name) == expected
    assert run(server, "histogram_observe") == "observed"
    cumulative = dict(zip(bounds, [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]))
    expected = {key(f"{name}_bucket", le=le, **labels): n for le, n in cumulative.items()}
    expected |= {key(f"{name}_count", **labels): 3.0, key(f"{name}_sum", **labels): 7.55}
    assert samples(scrape(server), name) == expected
    log = server.log_text()
    assert all(f"qa_metrics observed {value}" in log for value in (0.05, 1.5, 6.0))


def test_histogram_bucket_arguments(server):
    """qa test_histogram_args: no buckets (left out or None) is refused, [] is allowed."""
    missing = "TritonModelException:Failed to create metric. Missing required buckets."
    assert run(server, "histogram_args") == {
        "no_buckets": missing,
        "buckets_none": missing,
        "empty_list": "ok:'Metric'",
    }


@pytest.mark.deviation(
    "the original aborts the whole tritonserver now and then (boost::interprocess::"
    "lock_exception) whenever the server's metrics API returns an error to the stub; the "
    "text is the one it raises when it survives"
)
@pytest.mark.parametrize("mode", ["not_ascending", "duplicates"])
def test_histogram_buckets_out_of_order_are_refused(server, mode):
    """qa test_histogram_args: buckets not strictly ascending raise TritonModelException."""
    assert run(server, mode) == (
        "TritonModelException:Error when creating Metric: Failed to process the request for "
        "model 'qa_metrics_0', message: Bucket Boundaries must be strictly sorted"
    )
    assert server.is_alive()


def test_same_family_name_keeps_the_first_description(server):
    """qa test_dup_metric_family_diff_description."""
    assert run(server, "dup_description") == 0.0
    lines = family_lines(server, "pbqa_dup_desc")
    assert "# HELP pbqa_dup_desc first description" in lines
    assert not [line for line in lines if "second description" in line]


def test_same_family_twice_is_one_family(server):
    """qa test_dup_metric_family: one HELP/TYPE, both label sets at 0."""
    assert run(server, "dup_family") == [0.0, 0.0]
    lines = family_lines(server, "pbqa_dup_family")
    assert lines.count("# HELP pbqa_dup_family dup description") == 1
    assert lines.count("# TYPE pbqa_dup_family counter") == 1
    assert samples(scrape(server), "pbqa_dup_family") == {
        key("pbqa_dup_family", custom_metric_key="label1"): 0.0,
        key("pbqa_dup_family", custom_metric_key="label2"): 0.0,
    }


@pytest.mark.parametrize(
    "mode,name,labels",
    [
        ("dup_metric_labels", "pbqa_dup_labels", {"example1": "label1", "example2": "label2"}),
        ("dup_metric_empty_labels", "pbqa_dup_empty", {}),
    ],
)
def test_same_labels_twice_is_one_metric(server, mode, name, labels):
    """qa test_dup_metric_labels / _empty_labels: both objects read one series, which stays
    on the endpoint after one of them is deleted."""
    assert run(server, mode) == {"before": [0.0, 0.0], "after": [7.5, 7.5]}
    assert samples(scrape(server), name) == {key(name, **labels): 7.5}
    assert "# HELP {} dup metric".format(name) in family_lines(server, name)


def test_metrics_of_a_deleted_family_raise(server):
    """qa test_metric_lifetime_error, every call it makes on a counter and a gauge."""
    assert run(server, "deleted_family") == {
        "COUNTER": {
            "increment": f"TritonModelException:Failed to increment metric value: {DELETED}",
            "value": f"TritonModelException:Failed to get metric value: {DELETED}",
        },
        "GAUGE": {
            "increment": f"TritonModelException:Failed to increment metric value: {DELETED}",
            "value": f"TritonModelException:Failed to get metric value: {DELETED}",
            "set": f"TritonModelException:Failed to set metric value: {DELETED}",
        },
    }


def test_histogram_shared_by_instances_survives_a_reload(server, feature_repository):
    """qa custom_metrics_reload_test: three instances share one histogram series; a reload
    (the old instances let go while the new ones hold it) keeps the server serving."""
    name = "qa_metrics_reload"
    load(server, name)
    try:
        for _ in range(6):
            reply = infer(server, "http", name, {})
            np.testing.assert_array_equal(reply.outputs["OUTPUT0"], [1.0])
        os.utime(feature_repository.model_dir(name) / "1" / "model.py")
        load(server, name)
        for _ in range(6):
            reply = infer(server, "http", name, {})
            np.testing.assert_array_equal(reply.outputs["OUTPUT0"], [1.0])
        # One series all along: the old instances' going did not take it from the new ones.
        count = key("pbqa_reload_histogram_count", model=name)
        assert samples(scrape(server), "pbqa_reload_histogram")[count] == 12.0
        assert server.is_alive()
    finally:
        unload(server, name)
