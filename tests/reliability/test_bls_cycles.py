"""No request waits forever on itself (issue 27, docs/reliability.md "BLS call cycles"): a
blocking BLS call that closes a cycle no free instance can serve is answered at once with
an error naming the cycle and the fix; a cycle a free instance can serve still runs.

Every model answers "error: <message>" for a failed call, so the refusal's text reaches the
client as an output. The client's timeout bounds each wait: on the original (and before
the fix) these requests hang until it.

A call's ``timeout=`` does not end such a wait: tritonserver 2.51 takes a request's timeout
only below a default timeout of the target's queue policy (dynamic batching's
``default_queue_policy { default_timeout_microseconds }``, with ``allow_timeout_override``)
and ignores it everywhere else. Measured with a self call of ``timeout=1000000`` on one
instance, original and ours before this rule counted such calls: no dynamic batching, a
dynamic batcher, one with ``allow_timeout_override`` and no default: all three waited past
a 12 s client timeout; with a default timeout of 1 s: "Request timeout expired" after
1.5 s, with or without the call's timeout (both backends)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from reliability_support import MODELS as RELIABILITY_MODELS
from reliability_support import start

# One model source (models/cycle) under each name; the instance count and the config's
# dynamic batcher differ.
EXPIRING = "dynamic_batching { default_queue_policy { default_timeout_microseconds: 1000000 } }"
OVERRIDE = "dynamic_batching { default_queue_policy { allow_timeout_override: true } }"
# An expired request is moved back into the queue, never failed: the call still waits.
DELAYING = EXPIRING.replace("1000000", "1000000 timeout_action: DELAY")
MODELS = {
    "cycle_self": (1, ""),
    "cycle_self2": (2, ""),
    "cycle_a": (1, ""),
    "cycle_b": (1, ""),
    "cycle_expiring": (1, EXPIRING),
    "cycle_override": (1, OVERRIDE),
    "cycle_delaying": (1, DELAYING),
}
CLIENT_TIMEOUT_S = 30.0
FIX = "or call without a cycle."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    repo = tmp_path_factory.mktemp("cycles")
    for name, (count, batcher) in MODELS.items():
        shutil.copytree(RELIABILITY_MODELS / "cycle", repo / name)
        config = repo / name / "config.pbtxt"
        text = config.read_text()
        assert "count: 1 " in text, "models/cycle/config.pbtxt's instance_group changed"
        config.write_text(text.replace("count: 1 ", f"count: {count} ") + batcher + "\n")
    with start(list(MODELS), repository=repo) as s:
        yield s


def run(http: Any, server: Any, model: str, path: str) -> str:
    import tritonclient.http as httpclient

    client = http(server, connection_timeout=CLIENT_TIMEOUT_S, network_timeout=CLIENT_TIMEOUT_S)
    inp = httpclient.InferInput("PATH", [1], "BYTES")
    inp.set_data_from_numpy(np.array([path.encode()], dtype=np.object_))
    result = client.infer(model, [inp])
    return result.as_numpy("MSG")[0].decode()


def refusal(caller: str, callee: str, cycle: str) -> str:
    """The whole text for a one-instance target."""
    return (
        f"error: Model {callee} - Error when running inference: the BLS call from model "
        f"'{caller}' (instance '{caller}_0_0') to model '{callee}' would wait forever: it "
        f"closes the call cycle {cycle}, and the only instance of '{callee}' is blocked in a "
        f"BLS call on this cycle. Give '{callee}' more instances than the cycle can hold "
        f"(instance_group [ {{ count: 2 }} ] in its config.pbtxt), {FIX}"
    )


def test_self_call_with_one_instance_is_refused_at_once(server: Any, http: Any) -> None:
    message = run(http, server, "cycle_self", "cycle_self")
    assert message == refusal("cycle_self", "cycle_self", "cycle_self -> cycle_self")


def test_a_timeout_the_server_ignores_does_not_keep_the_call_waiting(
    server: Any, http: Any
) -> None:
    """timeout= on the self call: without a queue policy's timeout, tritonserver ignores it
    (module docstring), so the call is refused as one without it."""
    for model in ("cycle_self", "cycle_override"):
        message = run(http, server, model, f"{model}@1000000")
        assert message == refusal(model, model, f"{model} -> {model}")


def test_a_queue_that_delays_what_expires_does_not_end_the_wait(server: Any, http: Any) -> None:
    """timeout_action DELAY: the expired call goes back in the queue behind its own caller."""
    message = run(http, server, "cycle_delaying", "cycle_delaying")
    assert message == refusal(
        "cycle_delaying", "cycle_delaying", "cycle_delaying -> cycle_delaying"
    )


def test_a_queue_that_expires_requests_ends_the_wait_as_on_the_original(
    server: Any, http: Any
) -> None:
    """The target's queue policy has a timeout: the queued self call expires (Triton's own
    answer, as the original gives it), it is not refused; its instance serves on."""
    for path in ("cycle_expiring", "cycle_expiring@500000"):
        assert run(http, server, "cycle_expiring", path) == "error: Request timeout expired"
    assert run(http, server, "cycle_expiring", "") == "leaf cycle_expiring"


def test_two_model_cycle_is_refused_at_once(server: Any, http: Any) -> None:
    """cycle_a -> cycle_b -> cycle_a, one instance each: cycle_b's call is refused and
    cycle_a passes cycle_b's answer on."""
    message = run(http, server, "cycle_a", "cycle_b,cycle_a")
    assert message == refusal("cycle_b", "cycle_a", "cycle_a -> cycle_b -> cycle_a")


def test_a_cycle_a_free_instance_serves_still_runs(server: Any, http: Any) -> None:
    """Two instances: the self call is served by the second one."""
    assert run(http, server, "cycle_self2", "cycle_self2") == "leaf cycle_self2"


def test_a_cycle_longer_than_the_instances_is_refused_at_its_last_call(
    server: Any, http: Any
) -> None:
    """Two instances, three nested self calls: the third call finds both blocked."""
    message = run(http, server, "cycle_self2", "cycle_self2,cycle_self2")
    assert message.startswith("error: Model cycle_self2 - Error when running inference: ")
    assert "closes the call cycle cycle_self2 -> cycle_self2 -> cycle_self2," in message
    assert "all 2 instances of 'cycle_self2' are blocked in BLS calls on this cycle" in message
    assert "instance_group [ { count: 3 } ]" in message


def test_calls_without_a_cycle_and_after_a_refusal_run(server: Any, http: Any) -> None:
    """A refusal leaves nothing behind: the same models serve plain chains afterwards."""
    run(http, server, "cycle_self", "cycle_self")
    assert run(http, server, "cycle_a", "cycle_b") == "leaf cycle_b"
    assert run(http, server, "cycle_b", "cycle_a,cycle_self") == "leaf cycle_self"
    assert run(http, server, "cycle_self", "") == "leaf cycle_self"


def test_concurrent_self_calls_never_wait_forever(server: Any, http: Any) -> None:
    """Eight clients at once on two instances that each call themselves: whether a call
    finds a free instance depends on timing (both instances may hold a client's request
    and call at once, closing the cycle), so each answer is the callee's or the refusal,
    and none waits past the client's timeout."""
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda _: run(http, server, "cycle_self2", "cycle_self2"), range(8))
        )
    for answer in answers:
        assert answer == "leaf cycle_self2" or (
            "closes the call cycle cycle_self2 -> cycle_self2," in answer
        ), answer
    assert "leaf cycle_self2" in answers  # a refused call frees its instance for the others
