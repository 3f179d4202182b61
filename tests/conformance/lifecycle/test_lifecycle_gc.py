"""What initialize built and the model drops later (new weights replacing the first) is
freed, also when it sits in a reference cycle that only Python's cyclic collector breaks,
as on the original. Before, ours froze the whole heap out of the collector after initialize
(gc.freeze, for short collections): a model refreshing its weights kept the first copy in
memory for good. Now only model.py's import is frozen (stub/main.py freeze_import_heap)."""

from __future__ import annotations

import json

import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer, text_output

MODEL = "gc_state"


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL]) as srv:
        yield srv


def report(server, protocol: str, mode: str) -> dict:
    result = infer(server, protocol, MODEL, {"MODE": bytes_input(mode)})
    return json.loads(text_output(result, "REPORT"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_weights_initialize_built_are_freed_once_dropped(server, protocol):
    before = report(server, protocol, "state")
    assert before["first_freed"] is (before["refreshed"] > 0)
    after = report(server, protocol, "refresh")
    assert after == {"refreshed": before["refreshed"] + 1, "first_freed": True}
