"""NVIDIA's qa L0_backend_python/logging (docs/qa_coverage.md): how many of a model's Logger
messages reach the server log under the default settings, with verbose logging switched on
at run time, and with info, warning and error logging switched off at run time."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conformance_support.clients import infer
from conformance_support.control import http_client, load, unload, wait_for

KINDS = ["Specific", "Info", "Warning", "Error", "Verbose"]
DEFAULTS = {"log_verbose_level": 0, "log_info": True, "log_warning": True, "log_error": True}


@pytest.fixture(scope="module")
def server(feature_repository):
    # No --log-verbose: qa runs this test on the server's default log settings.
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


def _settings(server, **settings) -> None:
    client = http_client(server)
    try:
        client.update_log_settings(settings)
    finally:
        client.close()


def _one_round(server, after_load: dict, last_line: str | None) -> dict[str, int]:
    """Load, change the settings, infer once, unload: each kind's count in the new log."""
    start = len(server.log_text())
    load(server, "qa_log_counts")
    try:
        # The original's stub forwards its log messages apart from its answers, so its
        # load may return before initialize's lines are in the log (ours waits for them:
        # test_log_barrier.py); they must be there before the settings change, which would
        # drop them.
        shown = "QA-LOG Initialize-Error Msg!"
        wait_for(lambda: shown in server.log_text()[start:], 30, shown)
        _settings(server, **after_load)
        data = np.array([[1.0]], np.float32)
        result = infer(server, "http", "qa_log_counts", {"INPUT0": data})
        assert result.outputs["OUTPUT0"].tolist() == [[1.0]]
        unload(server, "qa_log_counts")
        if last_line:
            wanted = re.compile(re.escape(last_line))
            wait_for(lambda: wanted.search(server.log_text()[start:]), 30, last_line)
        log = server.log_text()[start:]
    finally:
        _settings(server, **DEFAULTS)
    return {kind: len(re.findall(rf"QA-LOG \w+-{kind} Msg!", log)) for kind in KINDS}


def test_default_settings_show_every_message_but_the_verbose_ones(server):
    counts = _one_round(server, {}, "QA-LOG Finalize-Error Msg!")
    assert counts == {"Specific": 4, "Info": 4, "Warning": 4, "Error": 4, "Verbose": 0}


def test_verbose_switched_on_after_initialize(server):
    counts = _one_round(server, {"log_verbose_level": 1}, "QA-LOG Finalize-Verbose Msg!")
    assert counts == {"Specific": 4, "Info": 4, "Warning": 4, "Error": 4, "Verbose": 3}


def test_info_warning_and_error_switched_off_after_initialize(server):
    off = {"log_info": False, "log_warning": False, "log_error": False}
    counts = _one_round(server, off, None)
    assert counts == {"Specific": 1, "Info": 1, "Warning": 1, "Error": 1, "Verbose": 0}
