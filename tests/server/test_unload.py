"""pybackend.server.unload without a server: nothing answering is a quick False, never a
wait or an exception (the stop goes on to its signal)."""

from __future__ import annotations

import time

from pybackend.server.processes import free_ports
from pybackend.server.unload import unload_models


def test_nothing_listening_is_false_at_once() -> None:
    started = time.monotonic()
    assert unload_models("127.0.0.1", free_ports(1)[0], wait_s=5.0) is False
    assert time.monotonic() - started < 2.0  # refused at once, not waited out
