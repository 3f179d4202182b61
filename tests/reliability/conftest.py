"""Reliability suite (issue 5): crashes, hangs, memory and bad input through a real
tritonserver with our backend. Models live in models/; each module starts the servers it
needs with explicit model control, loading only the models it uses."""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# conformance_support.metrics_endpoint reads the metrics endpoint for the metrics tests here.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "conformance"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Opt-in runs: minutes long or gigabytes large, never part of a plain `pytest`.
    if "soak" not in (config.option.markexpr or ""):
        opt_in = pytest.mark.skip(reason="opt-in: select with -m soak")
        for item in items:
            if item.get_closest_marker("soak") is not None:
                item.add_marker(opt_in)
    # Crash and restart behaviour is ours: the original has no restart and no timeouts.
    if (os.environ.get("PYBACKEND_TEST_BACKEND", "ours").strip() or "ours") != "ours":
        skip = pytest.mark.skip(reason="reliability bars are pybackend's own (no restart upstream)")
        for item in items:
            if "reliability" in pathlib.Path(str(item.path)).parts:
                item.add_marker(skip)


@pytest.fixture
def http(request: pytest.FixtureRequest) -> Iterator[Any]:
    """An HTTP client factory; every client made is closed after the test, or before its
    server stops if that comes first: tritonserver waits for open HTTP connections for its
    whole exit timeout (15 s here) and then exits without unloading its models."""
    import tritonclient.http as httpclient

    made = []

    def make(server: Any, **kwargs: Any) -> Any:
        client = httpclient.InferenceServerClient(server.http_url, **kwargs)
        made.append(client)
        stop = server.stop

        def close_then_stop() -> Any:
            client.close()
            return stop()

        server.stop = close_then_stop
        return client

    yield make
    for c in made:
        c.close()
