"""The development server drops a model's custom metrics when it is unloaded, and a model
loaded again starts its series from zero, as tritonserver does.

A module of its own: the in-process models of one process share one metrics registry, as
the models of one tritonserver do, so another module's in-process server with the same
model (alive until its module ends) would keep the family, and its series, alive."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from test_metrics_differential import CUSTOM_METRICS, _apply

from conformance_support.metrics_endpoint import samples, scrape
from pybackend.devserver import DevServer


@pytest.mark.parametrize("mode", ["stub", "inprocess"])
def test_an_unloaded_models_metrics_are_gone(mode: str, tmp_path: Path) -> None:
    shutil.copytree(CUSTOM_METRICS, tmp_path / "custom_metrics")
    with DevServer(
        tmp_path, metrics_port=0, in_process=mode == "inprocess", echo_logs=False
    ) as dev:
        _apply(dev, [1.0])
        assert samples(scrape(dev), "pbconf_requests_total")
        client = httpclient.InferenceServerClient(dev.http_url)
        try:
            client.unload_model("custom_metrics")
            assert "pbconf_" not in scrape(dev)
            client.load_model("custom_metrics")  # back, its series starting again
        finally:
            client.close()
        assert set(samples(scrape(dev), "pbconf_requests_total").values()) == {0.0}
