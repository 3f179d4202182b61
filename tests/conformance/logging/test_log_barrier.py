"""A stub's log lines are in the server log when the load (unload) that ran initialize
(finalize) completes. The lines travel on the stub's async channel and its INIT_REPLY /
FINALIZE_REPLY on the sync one; the reply counts what it follows (docs/protocol.md) and the
backend waits for that many. The original forwards them from another thread and completes
the load first: lines still queued then are missing from a log read at once, and lost to a
logging switch made at once (docs/compatibility.md)."""

from __future__ import annotations

import pytest

from conformance_support.control import load, model_states, unload

MODEL = "log_burst"
LONG = 4 << 20  # the length of the line initialize and finalize each log

ORIGINAL_RACES = pytest.mark.deviation(
    "the original completes the load and the unload before the lines the stub logged during "
    "them are all in the server log"
)


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


def _logged(server, phase: str, start: int) -> bool:
    return f"LOG-BURST {phase} {'x' * LONG}" in server.log_text()[start:]


@ORIGINAL_RACES
def test_initialize_lines_are_logged_before_the_load_completes(server):
    start = len(server.log_text())
    load(server, MODEL)
    try:
        # Read once, at once: no waiting for the lines.
        assert _logged(server, "initialize", start)
    finally:
        unload(server, MODEL)


@ORIGINAL_RACES
def test_finalize_lines_are_logged_before_the_unload_completes(server):
    load(server, MODEL)
    start = len(server.log_text())
    unload(server, MODEL)  # returns once the index shows the model unloaded
    assert model_states(server, MODEL) == {"UNAVAILABLE"}
    assert _logged(server, "finalize", start)
