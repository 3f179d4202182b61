"""Custom metrics: MetricFamily COUNTER/GAUGE/HISTOGRAM with labels and buckets on the
server's metrics endpoint, and the spec's errors (spec 3.2 MetricFamily)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer, text_output
from conformance_support.control import load, unload
from conformance_support.metrics_endpoint import family_lines, key, samples, scrape

VALUES = [0.25, 1.0, 3.0]
MODEL_LABELS = {"model": "custom_metrics", "version": "1"}


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=["custom_metrics"])
    with start as srv:
        yield srv


@pytest.fixture(scope="module")
def applied(server):
    """Feed VALUES once; returns what the model's Metric.value() calls reported."""
    inputs = {"MODE": bytes_input("apply"), "VALUES": np.array(VALUES, np.float64)}
    return json.loads(text_output(infer(server, "http", "custom_metrics", inputs), "RESULT"))


def test_metric_values_seen_by_the_model(applied):
    assert applied == {"counter": 4.25, "gauge": 3.0, "other": 1.0}


@pytest.mark.parametrize(
    "family,kind,description",
    [
        ("pbconf_requests_total", "counter", "Requests seen by the conformance model"),
        ("pbconf_last_value", "gauge", "Last value seen"),
        ("pbconf_value_distribution", "histogram", "Values seen"),
    ],
)
def test_family_help_and_type(server, applied, family, kind, description):
    lines = scrape(server).splitlines()
    assert f"# HELP {family} {description}" in lines
    assert f"# TYPE {family} {kind}" in lines


def test_counter_with_labels(server, applied):
    found = samples(scrape(server), "pbconf_requests_total")
    assert found == {
        key("pbconf_requests_total", **MODEL_LABELS): 4.25,
        key("pbconf_requests_total", model="other"): 1.0,
    }


def test_gauge(server, applied):
    assert samples(scrape(server), "pbconf_last_value") == {
        key("pbconf_last_value", **MODEL_LABELS): 3.0
    }


def test_histogram_buckets(server, applied):
    name = "pbconf_value_distribution"
    assert samples(scrape(server), name) == {
        key(f"{name}_count", **MODEL_LABELS): 3.0,
        key(f"{name}_sum", **MODEL_LABELS): 4.25,
        key(f"{name}_bucket", le="0.5", **MODEL_LABELS): 1.0,
        key(f"{name}_bucket", le="1", **MODEL_LABELS): 2.0,
        key(f"{name}_bucket", le="2.5", **MODEL_LABELS): 2.0,
        key(f"{name}_bucket", le="+Inf", **MODEL_LABELS): 3.0,
    }


IPC = "Failed to process the request for model 'custom_metrics_0', message: "
MISUSE = {
    "kind_values": "ok:[0, 1, 2]",
    "labels_not_dict": "TritonModelException:Failed to create metric. Labels must be a dictionary.",
    "histogram_without_buckets": "TritonModelException:Failed to create metric. Missing "
    "required buckets.",
    "counter_with_buckets": "TritonModelException:Failed to create metric. Unexpected buckets "
    "found.",
    "gauge_with_buckets": "TritonModelException:Failed to create metric. Unexpected buckets found.",
    "buckets_not_list": "TritonModelException:Failed to create metric. Buckets must be a list.",
    "same_name_same_kind": "ok:'MetricFamily'",
    "gauge_negative_increment": "ok:None",
    "metric_of_deleted_family": "TritonModelException:Failed to increment metric value: "
    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The "
    "'MetricFamily' object should be deleted AFTER its corresponding 'Metric' objects have "
    "been deleted.",
}


# Errors the server's metrics API reports back through the stub. Texts observed from the
# original in the runs where it survived: it aborts intermittently on this error path.
SERVER_ERRORS = {
    "counter_negative_increment": "TritonModelException:Failed to increment metric value: "
    f"{IPC}TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
    "non-negative values.",
    "counter_set": "TritonModelException:Failed to set metric value: "
    f"{IPC}TRITONSERVER_METRIC_KIND_COUNTER does not support Set",
    "histogram_increment": "TritonModelException:Failed to increment metric value: "
    f"{IPC}TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Increment",
    "histogram_set": "TritonModelException:Failed to set metric value: "
    f"{IPC}TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Set",
    "same_name_other_kind": "TritonModelException:Error when creating MetricFamily: "
    f"{IPC}Family name already exists with different type",
}


def misuse(server, case: str) -> str:
    inputs = {"MODE": bytes_input(f"misuse:{case}"), "VALUES": np.zeros(1, np.float64)}
    return json.loads(text_output(infer(server, "http", "custom_metrics", inputs), "RESULT"))


@pytest.mark.parametrize("case", list(MISUSE))
def test_misuse_errors(server, case):
    assert misuse(server, case) == MISUSE[case]


@pytest.mark.deviation(
    "the original aborts the whole tritonserver now and then (boost::interprocess::"
    "lock_exception) whenever the server's metrics API returns an error to the stub"
)
@pytest.mark.parametrize("case", list(SERVER_ERRORS))
def test_server_side_metric_errors(server, case):
    assert misuse(server, case) == SERVER_ERRORS[case]
    assert server.is_alive()


@pytest.mark.deviation(
    "the original aborts the whole tritonserver (boost lock_exception) on observe() of a "
    "counter/gauge and value() of a histogram; ours raises"
)
@pytest.mark.parametrize(
    "case,prefix",
    [
        ("counter_observe", "TritonModelException:Failed to observe metric value: "),
        ("gauge_observe", "TritonModelException:Failed to observe metric value: "),
        ("histogram_value", "TritonModelException:Failed to get metric value: "),
    ],
)
def test_unsupported_operation_raises_instead_of_aborting(server, case, prefix):
    outcome = misuse(server, case)
    assert outcome.startswith(prefix), outcome
    assert server.is_alive()


def _load_use_unload(server) -> list[str]:
    load(server, "metrics_unload")
    try:
        infer(server, "http", "metrics_unload", {"IN": np.array([2.5])})
        lines = family_lines(server, "pbconf_unload_gauge")
        assert 'pbconf_unload_gauge{model="metrics_unload"} 2.5' in lines
    finally:
        unload(server, "metrics_unload")
    return family_lines(server, "pbconf_unload_gauge")


@pytest.mark.deviation("the original leaves an unloaded model's metric families on the endpoint")
def test_unloading_the_model_removes_its_metrics(server):
    assert _load_use_unload(server) == []


@pytest.mark.deviation("pins the original's stale families after unload", backend="original")
def test_original_keeps_metrics_after_unload(server):
    assert 'pbconf_unload_gauge{model="metrics_unload"} 2.5' in _load_use_unload(server)
