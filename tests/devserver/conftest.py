"""The development server on the examples, beside the session's real tritonserver (the
contract it is held to)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from integration_support import EXAMPLES_REPOSITORY
from pybackend.devserver import DevServer


@pytest.fixture(scope="module")
def devserver() -> Iterator[DevServer]:
    """Each example model in a stub process of its own; HTTP and gRPC on free ports."""
    with DevServer(EXAMPLES_REPOSITORY, grpc_port=0, echo_logs=False) as server:
        yield server
