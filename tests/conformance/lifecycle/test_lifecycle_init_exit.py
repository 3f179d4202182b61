"""A stub killed during ``initialize`` (qa L0_backend_python, model init_exit): the load fails
and the server log carries the original's ``Stub process '<instance>' is not healthy.``"""

from __future__ import annotations

import pytest

from conformance_support.control import load_error

TEXT = "Stub process 'init_exit_0_0' is not healthy."


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


def test_a_stub_killed_in_initialize_is_not_healthy(server):
    message = load_error(server, "init_exit")
    assert TEXT in message, message
    assert TEXT in server.log_text()
