"""pybackend's per-instance Prometheus metrics (UV-38, csrc/backend/instance_metrics.h): the
three stages of every batch, batches and requests per instance, and the stub's health
(ready gauge, restart counter) as an operator scrapes them from the metrics endpoint."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import tritonclient.http as httpclient
from reliability_support import infer, start, stubs, wait_for

from conformance_support.control import unloaded
from conformance_support.metrics_endpoint import samples, scrape

# Triton names a group's instances <group>_<index>; the group is chaos_0.
INSTANCES = {"chaos_0_0", "chaos_0_1"}
STAGES = (
    "pybackend_compute_input_duration_us",
    "pybackend_compute_infer_duration_us",
    "pybackend_compute_output_duration_us",
)


def series(server: Any, name: str) -> dict[str, float]:
    """instance -> value of one pybackend family for the chaos model, version 1."""
    found = {}
    for (metric, labels), value in samples(scrape(server), name).items():
        labels = dict(labels)
        if metric == name and labels.get("model") == "chaos" and labels.get("version") == "1":
            found[labels["instance"]] = value
    return found


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start(["chaos"], backend_config=[("stub-restart-max-backoff-seconds", "1")]) as s:
        yield s


def test_each_instance_counts_its_batches_and_their_time(server):
    before = series(server, "pybackend_inference_count")
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        for _ in range(20):
            infer(client, "chaos", "ok")
    finally:
        client.close()
    requests = series(server, "pybackend_inference_count")
    assert set(requests) == INSTANCES
    assert sum(requests.values()) - sum(before.values()) == 20
    batches = series(server, "pybackend_execution_count")
    assert batches == requests  # no dynamic batching here: one request per execute
    for stage in STAGES:
        spent = series(server, stage)
        assert set(spent) == set(requests)
        # Every batch takes some time in each stage (sub-microsecond parts are kept).
        assert all(v > 0 for i, v in spent.items() if requests[i] > 0)
    assert series(server, "pybackend_stub_ready") == dict.fromkeys(INSTANCES, 1.0)


def test_a_dead_stub_reads_not_ready_then_counts_its_restart(server):
    restarts_before = series(server, "pybackend_stub_restarts")
    victim, pid = sorted(stubs(server, "chaos").items())[0]
    os.kill(pid, signal.SIGKILL)
    # Ready drops to 0 while the restart backs off, then the new stub serves.
    wait_for(
        "the ready gauge to drop",
        lambda: series(server, "pybackend_stub_ready")[victim] == 0 or None,
        timeout=10,
        every=0.01,
    )
    wait_for(
        "the new stub to be counted",
        lambda: (
            series(server, "pybackend_stub_restarts")[victim] == restarts_before[victim] + 1 or None
        ),
        timeout=20,
    )
    ready = series(server, "pybackend_stub_ready")
    assert ready == dict.fromkeys(INSTANCES, 1.0)
    other = next(i for i in ready if i != victim)
    assert series(server, "pybackend_stub_restarts")[other] == restarts_before[other]


def test_unloading_removes_the_series_and_the_switch_turns_them_off():
    with start(["chaos"], backend_config=[("instance-metrics", "false")]) as off:
        client = httpclient.InferenceServerClient(off.http_url)
        try:
            infer(client, "chaos", "ok")
        finally:
            client.close()
        assert "pybackend_" not in scrape(off)
    with start(["chaos"]) as on:
        assert set(series(on, "pybackend_stub_ready")) == INSTANCES
        client = httpclient.InferenceServerClient(on.http_url)
        try:
            client.unload_model("chaos")
            # The stubs exit before their instances are finalized (which is what removes
            # the series); the server reports the model UNAVAILABLE only after both.
            unloaded(on, "chaos")
            assert not stubs(on, "chaos")
        finally:
            client.close()
        assert series(on, "pybackend_stub_ready") == {}
