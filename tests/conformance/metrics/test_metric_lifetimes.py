"""Custom metrics beyond one model instance's execute: families shared by instances, metrics
used from threads, and how long families and metrics live."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer, text_output
from conformance_support.control import load, unload, wait_for
from conformance_support.metrics_endpoint import family_lines, key, samples, scrape

DELETED = (
    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The "
    "'MetricFamily' object should be deleted AFTER its corresponding 'Metric' objects have "
    "been deleted."
)


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


def run(server, model: str, inputs: dict) -> object:
    return json.loads(text_output(infer(server, "http", model, inputs), "RESULT"))


def test_instances_share_a_family_and_its_series(server):
    """Both instances create 'pbconf_shared_total'; the metric with equal labels is ONE
    series both update, the per-instance ones stay apart."""
    load(server, "metrics_shared")
    try:
        name = "pbconf_shared_total"
        assert samples(scrape(server), name) == {
            key(name, model="metrics_shared"): 2.0,
            key(name, instance="metrics_shared_0_0"): 1.0,
            key(name, instance="metrics_shared_0_1"): 1.0,
        }
        result = run(server, "metrics_shared", {"IN": np.array([0.5])})
        assert result == {"shared": 2.5, "own": 1.5}
        found = samples(scrape(server), name)
        assert found[key(name, model="metrics_shared")] == 2.5
        assert sorted(v for k, v in found.items() if "instance" in dict(k[1])) == [1.0, 1.5]
    finally:
        unload(server, "metrics_shared")


def test_metrics_from_threads(server):
    """Created and updated from a thread inside initialize, a thread per execute and a
    background thread that lives as long as the instance."""
    load(server, "metrics_threads")
    try:
        first = run(server, "metrics_threads", {"IN": np.array([1.0, 1])})
        assert first == {"execute": 25.0, "background": 1.0, "initialize": 1.0}
        second = run(server, "metrics_threads", {"IN": np.array([2.0, 1])})
        assert second == {"execute": 75.0, "background": 3.0, "initialize": 1.0}
        name = "pbconf_thread_total"
        assert samples(scrape(server), name) == {
            key(name, **{"from": "initialize"}): 1.0,
            key(name, **{"from": "execute"}): 75.0,
            key(name, **{"from": "background"}): 3.0,
        }
    finally:
        unload(server, "metrics_threads")


@pytest.mark.deviation(
    "the original crashes tritonserver (SIGSEGV in libtritonserver, called from its backend) "
    "when several threads of one model update metrics at the same time"
)
def test_concurrent_metric_updates_from_threads(server):
    load(server, "metrics_threads")
    try:
        for round_ in (1, 2):
            result = run(server, "metrics_threads", {"IN": np.array([1.0, 8])})
            assert result["execute"] == 200.0 * round_
        assert server.is_alive()
    finally:
        unload(server, "metrics_threads")


def lifetime(server, mode: str) -> str:
    return run(server, "metrics_lifetime", {"MODE": bytes_input(mode)})


def settles(server, expected: dict) -> None:
    """Deletes travel without a reply: wait (bounded) until the endpoint shows them."""
    wait_for(
        lambda: samples(scrape(server), "pbconf_lifetime") == expected,
        10.0,
        f"pbconf_lifetime samples to become {expected}",
    )


def test_metrics_live_as_long_as_their_family(server):
    load(server, "metrics_lifetime")
    try:
        name = "pbconf_lifetime"
        assert lifetime(server, "make") == "ok:'made'"
        assert samples(scrape(server), name) == {key(name, key="a"): 1.0, key(name, key="b"): 2.0}
        # The family keeps its metrics: a dropped Metric object stays on the endpoint.
        assert lifetime(server, "drop_metric") == "ok:2.0"
        assert samples(scrape(server), name) == {key(name, key="a"): 1.0, key(name, key="b"): 2.0}
        # A dropped family invalidates the metrics still held, and leaves the endpoint.
        assert lifetime(server, "drop_family") == (
            f"TritonModelException:Failed to set metric value: {DELETED}"
        )
        settles(server, {})
        assert family_lines(server, name) == []
        # The same family can be made again, with fresh metrics.
        assert lifetime(server, "make") == "ok:'made'"
        assert samples(scrape(server), name) == {key(name, key="a"): 1.0, key(name, key="b"): 2.0}
    finally:
        unload(server, "metrics_lifetime")


@pytest.mark.deviation(
    "the original aborts the whole tritonserver now and then (boost::interprocess::"
    "lock_exception) whenever the server's metrics API returns an error to the stub"
)
def test_deleted_family_name_keeps_its_kind(server):
    """Triton keeps a deleted family's name with its kind (the server's rule: probing the
    original shows the same text when it survives); another kind is refused."""
    load(server, "metrics_lifetime")
    try:
        assert lifetime(server, "make") == "ok:'made'"
        assert lifetime(server, "drop_family").startswith("TritonModelException:")
        assert lifetime(server, "remake_other_kind") == (
            "TritonModelException:Error when creating MetricFamily: Failed to process the "
            "request for model 'metrics_lifetime_0', message: Family name already exists with "
            "different type"
        )
        assert server.is_alive()
    finally:
        unload(server, "metrics_lifetime")
