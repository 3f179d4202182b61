"""pybackend.pytriton against the real tritonserver: a Triton per test on free loopback
ports (TritonConfig), the callables served from this process."""

from __future__ import annotations

from typing import Iterator

import pytest

from integration_support.pytriton_helpers import loopback_config
from pybackend.pytriton.triton import Triton


@pytest.fixture
def triton() -> Iterator[Triton]:
    """Not yet running: the test binds, then calls run()."""
    t = Triton(config=loopback_config())
    try:
        yield t
    finally:
        t.stop()
