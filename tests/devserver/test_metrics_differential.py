"""The development server's metrics endpoint against tritonserver 2.51 with our backend:
a model's custom metrics (counter, gauge, histogram with its buckets, a second series of
one family) read the same from both, HELP and TYPE lines included."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Tuple

import numpy as np
import pytest
import tritonclient.http as httpclient
from side_by_side import MODES, copied, side_by_side

from conformance_support.metrics_endpoint import samples, scrape

CUSTOM_METRICS = (
    Path(__file__).resolve().parents[1] / "conformance" / "metrics" / "models" / "custom_metrics"
)
FAMILIES = ["pbconf_requests_total", "pbconf_last_value", "pbconf_value_distribution"]


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    with side_by_side(copied(tmp_path_factory, "metrics", CUSTOM_METRICS), request.param) as pair:
        yield pair


def _apply(server: Any, values: list) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        mode = httpclient.InferInput("MODE", [1], "BYTES")
        mode.set_data_from_numpy(np.array([b"apply"], dtype=object))
        data = httpclient.InferInput("VALUES", [len(values)], "FP64")
        data.set_data_from_numpy(np.array(values, np.float64))
        client.infer("custom_metrics", [mode, data])
    finally:
        client.close()


def _family(text: str, name: str) -> Tuple[list, dict]:
    """The family's HELP and TYPE lines, and its samples."""
    meta = [line for line in text.splitlines() if line.startswith(("# HELP", "# TYPE"))]
    return [line for line in meta if line.split()[2] == name], samples(text, name)


def test_custom_metrics_read_alike(servers: Tuple[Any, Any]) -> None:
    for values in ([0.25, 1.0, 2.0, 7.5], [0.5, 3.0]):
        for server in servers:
            _apply(server, values)
        real, dev = (scrape(server) for server in servers)
        for name in FAMILIES:
            assert _family(dev, name) == _family(real, name), name
    # What both show is what the model did (not the same nothing on both sides).
    got = samples(dev, "pbconf_value_distribution")
    bucket = ("pbconf_value_distribution_bucket", (("le", "1"), ("model", "custom_metrics"),
                                                   ("version", "1")))  # fmt: skip
    assert got[bucket] == 3  # 0.25, 1.0 and 0.5 are <= 1
    assert (
        samples(dev, "pbconf_last_value")[
            ("pbconf_last_value", (("model", "custom_metrics"), ("version", "1")))
        ]
        == 3.0
    )


def test_only_metrics_is_served(servers: Tuple[Any, Any]) -> None:
    _, dev = servers
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(dev.metrics_url.replace("/metrics", "/other"), timeout=10)
    info.value.close()  # the error holds the connection
    assert info.value.code == 404
