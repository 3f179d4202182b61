"""The development server on the examples, beside the session's real tritonserver (the
contract it is held to), in both of its modes."""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Iterator

import pytest

# conformance_support.metrics_endpoint reads the metrics endpoints for the metrics tests here.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "conformance"))

from integration_support import EXAMPLES_REPOSITORY  # noqa: E402
from pybackend.devserver import DevServer


@pytest.fixture(scope="module", params=["stub", "inprocess"])
def devserver(request: pytest.FixtureRequest) -> Iterator[DevServer]:
    """The examples, each model in a stub process of its own (``stub``) or in this process
    (``inprocess``); HTTP and gRPC on free ports."""
    with DevServer(
        EXAMPLES_REPOSITORY,
        grpc_port=0,
        in_process=request.param == "inprocess",
        echo_logs=False,
    ) as server:
        yield server
