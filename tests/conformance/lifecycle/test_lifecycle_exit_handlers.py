"""What model code registers with ``atexit`` runs when the model is unloaded, after its
``finalize`` and in reverse order of registration, as the original's stub runs it when its
interpreter ends (also in a model's shared process, and in each child of a fork host). Before,
ours left the stub with os._exit and ran none."""

from __future__ import annotations

import pytest

from conformance_support.control import load, unload, wait_for


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


def test_exit_handlers_run_after_finalize_at_unload(server, feature_repository):
    log = feature_repository.model_dir("exit_handlers") / "exit_handlers.log"
    log.unlink(missing_ok=True)
    load(server, "exit_handlers")
    unload(server, "exit_handlers")
    expected = ["finalize", "initialize exit_handlers_0", "import"]
    wait_for(
        lambda: log.exists() and log.read_text().splitlines()[-3:] == expected,
        10,
        f"{expected} at the end of {log}",
    )
    # Before them: the stub that ran auto-complete imported model.py too, and ran its handler
    # when it ended (on both backends).
    assert set(log.read_text().splitlines()[:-3]) <= {"import"}
