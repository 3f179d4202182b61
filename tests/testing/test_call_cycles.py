"""A blocking BLS call that closes a cycle no free instance can serve, in the offline engines
(pybackend/testing/call_cycles.py): answered at once with the error response tritonserver
gives under our backend (docs/reliability.md, "BLS call cycles"), instead of the harness
hanging until the test's timeout; a cycle a free instance serves still runs.

The models are tests/reliability's `cycle` (BLS along PATH, "error: <message>" for a failed
call; "name@us" calls with that timeout) under six names; every engine's answer is held to a
real tritonserver's. A self call with a timeout the server ignores is refused; one whose
target's queue policy expires requests gets Triton's "Request timeout expired" (from the
server after the policy's second, from the engines at once)."""

from __future__ import annotations

import re
import shutil
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import numpy as np
import pytest
import tritonclient.http as http

from pybackend.server import TritonServer
from pybackend.testing import ModelHarness, StubModel

CYCLE_MODEL = Path(__file__).resolve().parents[1] / "reliability" / "models" / "cycle"
INSTANCES = {
    "cycle_self": 1,
    "cycle_self2": 2,
    "cycle_a": 1,
    "cycle_b": 1,
    "cycle_expiring": 1,
    "cycle_override": 1,
}
BATCHERS = {
    "cycle_expiring": "dynamic_batching { default_queue_policy { "
    "default_timeout_microseconds: 1000000 } }",
    "cycle_override": "dynamic_batching { default_queue_policy { allow_timeout_override: true } }",
}
# (model called, PATH): refusals, chains that run, and plain calls after a refusal.
PATHS = [
    ("cycle_self", "cycle_self"),
    ("cycle_a", "cycle_b,cycle_a"),
    ("cycle_self2", "cycle_self2"),
    ("cycle_self2", "cycle_self2,cycle_self2"),
    ("cycle_a", "cycle_b"),
    ("cycle_b", "cycle_a,cycle_self"),
    ("cycle_self", ""),
    ("cycle_self", "cycle_self@1000000"),
    ("cycle_override", "cycle_override@1000000"),
    ("cycle_expiring", "cycle_expiring"),
    ("cycle_expiring", ""),
]
TIMEOUT_S = 20.0  # what a hang would cost each call; an answer takes milliseconds


def _path(path: str) -> np.ndarray:
    return np.array([path.encode()], np.object_)


def _any_instance(answer: str) -> str:
    """Which of two instances takes a client's request is the server's choice (the
    engines give it to the first): the instance a refusal names, as one of the model's."""
    return re.sub(r"\(instance '(\w+)_0_\d+'\)", r"(instance '\1_0_*')", answer)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: Any) -> Path:
    repo = tmp_path_factory.mktemp("cycles")
    for name, count in INSTANCES.items():
        shutil.copytree(CYCLE_MODEL, repo / name)
        config = repo / name / "config.pbtxt"
        text = config.read_text()
        assert "count: 1 " in text, "models/cycle/config.pbtxt's instance_group changed"
        config.write_text(text.replace("count: 1 ", f"count: {count} ") + BATCHERS.get(name, ""))
    return repo


@pytest.fixture(scope="module")
def by_server(repository: Path) -> Dict[Tuple[str, str], str]:
    """What tritonserver with our backend answers each PATH."""
    answers = {}
    with TritonServer(repository) as server:
        client = http.InferenceServerClient(server.http_url.split("://")[-1])
        for model, path in PATHS:
            given = http.InferInput("PATH", [1], "BYTES")
            given.set_data_from_numpy(_path(path))
            answers[model, path] = client.infer(model, [given]).as_numpy("MSG")[0].decode()
    return answers


@pytest.fixture(params=[ModelHarness, StubModel], ids=["harness", "stub"])
def engine(request: Any, repository: Path) -> Iterator[Dict[str, Any]]:
    """The four models started in one engine (so their BLS calls reach each other)."""
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(request.param(repository / name, instances=count))
            for name, count in INSTANCES.items()
        }


def test_every_answer_is_the_servers_and_comes_at_once(
    engine: Dict[str, Any], by_server: Dict[Tuple[str, str], str]
) -> None:
    refused = expired = 0
    for model, path in PATHS:
        start = time.monotonic()
        answer = engine[model].infer({"PATH": _path(path)}, timeout=TIMEOUT_S)["MSG"][0].decode()
        assert _any_instance(answer) == _any_instance(by_server[model, path]), (model, path)
        assert time.monotonic() - start < TIMEOUT_S / 2, (model, path)  # never the timeout
        refused += "would wait forever" in answer
        expired += answer == "error: Request timeout expired"
    # The one-instance self call, a -> b -> a, three on two instances, two with a timeout.
    assert (refused, expired) == (5, 1)


def test_the_refusal_names_the_cycle_and_the_fix(engine: Dict[str, Any]) -> None:
    answer = engine["cycle_a"].infer({"PATH": _path("cycle_b,cycle_a")})["MSG"][0].decode()
    assert answer == (
        "error: Model cycle_a - Error when running inference: the BLS call from model "
        "'cycle_b' (instance 'cycle_b_0_0') to model 'cycle_a' would wait forever: it closes "
        "the call cycle cycle_a -> cycle_b -> cycle_a, and the only instance of 'cycle_a' is "
        "blocked in a BLS call on this cycle. Give 'cycle_a' more instances than the cycle "
        "can hold (instance_group [ { count: 2 } ] in its config.pbtxt), or call without a "
        "cycle."
    )


def test_concurrent_self_calls_never_wait_forever(engine: Dict[str, Any]) -> None:
    """Clients on several threads at once, each a self call of the two-instance model: each
    answer is the callee's or the refusal, and none waits for the timeout."""
    model = engine["cycle_self2"]
    answers = []

    def client() -> None:
        out = model.infer({"PATH": _path("cycle_self2")}, timeout=TIMEOUT_S)
        answers.append(out["MSG"][0].decode())

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S * 2)
    assert len(answers) == 6
    for answer in answers:
        assert answer == "leaf cycle_self2" or "closes the call cycle" in answer, answer
    assert "leaf cycle_self2" in answers


@pytest.mark.parametrize("mode", ["shared", "fork"])
@pytest.mark.parametrize("kind", [ModelHarness, StubModel], ids=["harness", "stub"])
def test_instances_that_share_a_process_follow_the_rule(
    repository: Path, kind: Any, mode: str
) -> None:
    """Under PYBACKEND_INSTANCE_PROCESS shared and fork (docs/instances.md) too: a self call
    runs on the other instance, three nested ones are refused at the third."""
    with kind(repository / "cycle_self2", instances=2, instance_process=mode) as model:
        one = model.infer({"PATH": _path("cycle_self2")}, timeout=TIMEOUT_S)
        assert one["MSG"][0].decode() == "leaf cycle_self2"
        nested = model.infer({"PATH": _path("cycle_self2,cycle_self2")}, timeout=TIMEOUT_S)
        answer = nested["MSG"][0].decode()
        assert "closes the call cycle cycle_self2 -> cycle_self2 -> cycle_self2," in answer
        assert "all 2 instances of 'cycle_self2' are blocked in BLS calls" in answer
