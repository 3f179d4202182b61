"""A loaded model loaded again with only its instance count changed (NVIDIA's qa
L0_model_update, instance_update_test.py): tritonserver 2.51 starts the added instances or
finalizes the removed ones and leaves the others serving; any other change reloads every
instance. The count is changed in config.pbtxt, as the qa does (a configuration passed
with the load call is taken the same way). Under PYBACKEND_TEST_INSTANCE_PROCESS=shared|fork the
added instances join the model's process (shared) or are forked from its host (fork)."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from conformance_support.clients import infer, text_output
from conformance_support.control import load, unload, unloaded, wait_for

MODEL = "mc_updating"
WAIT_S = 30.0


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


class Updating:
    """The mc_updating model of this server: its config's instance group and the events
    its instances write (model.py)."""

    def __init__(self, server: Any, model_dir: Path) -> None:
        self.server = server
        self.config = model_dir / "config.pbtxt"
        self.state = model_dir.parent.parent / "mc_updating_state"

    def events(self, kind: str) -> Counter[tuple[str, str]]:
        path = self.state / "events"
        lines = path.read_text().splitlines() if path.exists() else []
        return Counter(tuple(line.split()[1:]) for line in lines if line.startswith(kind + " "))

    def names(self, kind: str) -> Counter[str]:
        return Counter(name for name, _ in self.events(kind).elements())

    def write(self, count: int, extra: str = "") -> None:
        text = re.sub(r"count: \d+", f"count: {count}", self.config.read_text())
        self.config.write_text(text + extra)

    def load(self, count: int, extra: str = "") -> None:
        self.write(count, extra)
        load(self.server, MODEL)

    def who(self, hold: int = 0) -> str:
        reply = infer(
            self.server, "http", MODEL, {"HOLD": np.array([hold], np.int32)}, client_timeout=60
        )
        return text_output(reply, "WHO")

    def gate(self, name: str) -> Path:
        self.state.mkdir(exist_ok=True)
        path = self.state / name
        path.touch()
        return path

    def settle(self, inits: int, finis: int) -> None:
        """Waits for the counts: a removed instance is finalized after the load returns."""
        wait_for(
            lambda: (
                (sum(self.events("init").values()), sum(self.events("fini").values()))
                == (inits, finis)
            ),
            WAIT_S,
            f"{inits} initialize and {finis} finalize calls, got {self.names('init')} and "
            f"{self.names('fini')}",
        )


@pytest.fixture
def model(server: Any, feature_repository: Any) -> Iterator[Updating]:
    updating = Updating(server, feature_repository.model_dir(MODEL))
    original = updating.config.read_text()
    # The original's stub writes __pycache__ into the model's directory at its first import,
    # and tritonserver then takes the model's files as changed: its first instance update
    # would reload everything. A first load and unload leaves that behind (ours writes none).
    load(server, MODEL)
    unload(server, MODEL)
    unloaded(server, MODEL)
    (updating.state / "events").unlink(missing_ok=True)
    yield updating
    for gate in ("init_gate", "exec_gate"):
        (updating.state / gate).unlink(missing_ok=True)
    unload(server, MODEL)
    unloaded(server, MODEL)
    updating.config.write_text(original)


def test_a_count_change_starts_or_finalizes_only_the_difference(model):
    model.load(3)
    model.settle(3, 0)
    assert model.names("init") == Counter(f"{MODEL}_0_{i}" for i in range(3))
    first = model.events("init")
    model.load(4)
    model.settle(4, 0)
    assert model.names("init") - Counter(name for name, _ in first) == Counter([f"{MODEL}_0_3"])
    assert model.who().startswith(f"{MODEL}_0_")
    model.load(3)
    model.settle(4, 1)
    removed = model.events("fini")
    assert removed <= model.events("init"), "finalize of an instance that never started"
    model.load(4)
    model.settle(5, 1)
    assert model.who().startswith(f"{MODEL}_0_")
    unload(model.server, MODEL)
    unloaded(model.server, MODEL)
    model.settle(5, 5)
    # Each instance that started was finalized once, in the process it started in.
    assert model.events("fini") == model.events("init")


def test_an_instance_is_added_while_another_executes(model):
    model.load(1)
    gate = model.gate("exec_gate")
    answers: list[str] = []
    held = threading.Thread(target=lambda: answers.append(model.who(hold=1)))
    held.start()
    try:
        wait_for(lambda: model.names("held")[f"{MODEL}_0_0"] == 1, WAIT_S, "the held execute")
        model.load(2)
        # The load returned while instance 0 still executes; the new instance serves.
        assert held.is_alive()
        assert model.who() == f"{MODEL}_0_1"
        assert model.events("fini") == Counter()
    finally:
        gate.unlink()
        held.join(WAIT_S)
    assert answers == [f"{MODEL}_0_0"]


def test_requests_are_served_while_an_added_instance_initializes(model):
    model.load(1)
    gate = model.gate("init_gate")
    loading = threading.Thread(target=model.load, args=(2,))
    loading.start()
    try:
        wait_for(lambda: model.names("init")[f"{MODEL}_0_1"] == 1, WAIT_S, "the new instance")
        # Instance 1 is still in initialize (the load has not returned): 0 serves.
        assert model.who() == f"{MODEL}_0_0"
        assert loading.is_alive()
    finally:
        gate.unlink()
        loading.join(WAIT_S)
    assert not loading.is_alive()
    assert model.who(hold=0).startswith(f"{MODEL}_0_")
    assert model.events("fini") == Counter()


def test_another_change_with_the_count_reloads_every_instance(model):
    """qa test_more_than_instance_update (it enables dynamic batching with the new count):
    a parameter and the count changed together."""
    model.load(4)
    model.settle(4, 0)
    old = model.events("init")
    model.load(2, '\nparameters { key: "UPDATED" value: { string_value: "1" } }\n')
    model.settle(6, 4)
    assert model.events("fini") == old
    new = model.events("init") - old
    assert Counter(name for name, _ in new.elements()) == Counter([f"{MODEL}_0_0", f"{MODEL}_0_1"])
    assert not set(pid for _, pid in new) & set(pid for _, pid in old)


def test_an_invalid_config_keeps_the_instances_serving(model):
    model.load(4)
    model.settle(4, 0)
    good = model.config.read_text()
    model.config.write_text(re.sub(r"count: \d+", "--- not a count ---", good))
    with pytest.raises(InferenceServerException):
        load(model.server, MODEL)
    # The loaded instances serve on, with the broken file still in place.
    assert model.who().startswith(f"{MODEL}_0_")
    model.config.write_text(good)
    # The good config after it is still an update of the loaded instances.
    model.load(2)
    model.settle(4, 2)
    assert model.events("fini") <= model.events("init")
    assert model.who().startswith(f"{MODEL}_0_")
