"""The offline engines' BLS cycle rule on its own (pybackend/testing/call_cycles.py), case by
case as the backend's own registry is tested (csrc/tests/bls_cycles_test.cc): which blocking
calls are refused, and the cycle the refusal names."""

from __future__ import annotations

import pytest

from pybackend.testing.call_cycles import (
    QUEUE_EXPIRED,
    CallCycles,
    queue_expires,
    refusal_error,
)
from pybackend.testing.config import parse_config
from pybackend.utils.errors import ErrorCode


def registry(*instances: str) -> CallCycles:
    """A registry with ``model_<n>`` instances (their model is the name before '_')."""
    cycles = CallCycles()
    for name in instances:
        cycles.add_instance(name.rsplit("_", 1)[0], name)
    return cycles


def test_a_blocking_self_call_with_one_instance_is_refused() -> None:
    cycles = registry("m_0")
    with cycles.executing("m", "m_0", []):
        _, refusal = cycles.begin(("m", "m_0"), "m", blocking=True)
        assert "closes the call cycle m -> m, and the only instance of 'm' is blocked" in refusal
        assert "(instance_group [ { count: 2 } ] in its config.pbtxt)" in refusal
        # Not blocking (async_exec, a thread): it may be abandoned, so it waits.
        call, refusal = cycles.begin(("m", "m_0"), "m", blocking=False)
        assert refusal == ""
        cycles.end(call)


def test_a_caller_outside_execute_is_never_refused() -> None:
    cycles = registry("m_0")
    call, refusal = cycles.begin(("m", "m_0"), "m", blocking=True)  # a thread after execute
    assert refusal == ""
    cycles.end(call)


def test_a_free_instance_serves() -> None:
    cycles = registry("two_0", "two_1")
    with cycles.executing("two", "two_0", []):
        call, refusal = cycles.begin(("two", "two_0"), "two", blocking=True)
        assert refusal == ""  # two_1 is idle
        with cycles.executing("two", "two_1", [call]):  # and serves it
            _, refusal = cycles.begin(("two", "two_1"), "two", blocking=True)
            assert "closes the call cycle two -> two -> two," in refusal
            assert "all 2 instances of 'two' are blocked in BLS calls" in refusal
            assert "{ count: 3 }" in refusal
        cycles.end(call)


def test_a_busy_instance_that_is_not_blocked_may_free() -> None:
    cycles = registry("busy_0", "loop_0")
    with cycles.executing("busy", "busy_0", []), cycles.executing("loop", "loop_0", []):
        call, refusal = cycles.begin(("loop", "loop_0"), "busy", blocking=True)
        assert refusal == ""  # busy_0 computes, no call of its own: it will finish
        cycles.end(call)


def test_a_two_model_cycle_names_the_chain() -> None:
    cycles = registry("a_0", "b_0")
    with cycles.executing("a", "a_0", []):
        to_b, refusal = cycles.begin(("a", "a_0"), "b", blocking=True)
        assert refusal == ""
        with cycles.executing("b", "b_0", [to_b]):
            _, refusal = cycles.begin(("b", "b_0"), "a", blocking=True)
            assert "from model 'b' (instance 'b_0') to model 'a'" in refusal
            assert "closes the call cycle a -> b -> a," in refusal
        cycles.end(to_b)


def test_independent_requests_that_block_each_other() -> None:
    """c_0 serves a client and waits on d; d_0 serves another client and calls c: no request
    chain holds both, the wait-for walk names the cycle."""
    cycles = registry("c_0", "d_0")
    with cycles.executing("c", "c_0", []), cycles.executing("d", "d_0", []):
        to_d, refusal = cycles.begin(("c", "c_0"), "d", blocking=True)
        assert refusal == ""  # queued: d_0 may finish
        _, refusal = cycles.begin(("d", "d_0"), "c", blocking=True)
        assert "closes the call cycle d -> c -> d," in refusal
        cycles.end(to_d)


def test_unknown_targets_and_detached_calls_may_answer() -> None:
    cycles = registry("e_0", "f_0")
    with cycles.executing("e", "e_0", []):
        # Not a model of this world (a fake, another engine's): nothing is known of it.
        call, refusal = cycles.begin(("e", "e_0"), "onnx_model", blocking=True)
        assert refusal == ""
        cycles.end(call)
    with cycles.executing("e", "e_0", []):
        to_f, refusal = cycles.begin(("e", "e_0"), "f", blocking=True)
        assert refusal == ""
        with cycles.executing("f", "f_0", [to_f]):
            pass  # its execute returned without the answer: a thread of f's answers later
        with cycles.executing("f", "f_0", []):
            call, refusal = cycles.begin(("f", "f_0"), "e", blocking=True)
            assert refusal == ""
            cycles.end(call)
        cycles.end(to_f)


def test_refused_and_ended_calls_leave_nothing() -> None:
    cycles = registry("g_0", "k_0")
    for _ in range(2):
        with cycles.executing("g", "g_0", []):
            assert cycles.begin(("g", "g_0"), "g", blocking=True)[1] != ""
    with cycles.executing("k", "k_0", []), cycles.executing("g", "g_0", []):
        to_g, refusal = cycles.begin(("k", "k_0"), "g", blocking=True)
        assert refusal == ""  # g_0 computes, not blocked
        cycles.end(to_g)
        assert cycles.begin(("g", "g_0"), "k", blocking=True)[1] == ""  # k_0 waits on nothing


def test_a_chain_through_three_models_is_followed() -> None:
    """The chain passes through the batches that serve each call; a batch begun with none
    served starts a chain of its own."""
    cycles = registry("h_0", "i_0", "j_0")
    with cycles.executing("h", "h_0", []):
        to_i, _ = cycles.begin(("h", "h_0"), "i", blocking=True)
        with cycles.executing("i", "i_0", [None, to_i]):  # batched with a client's request
            to_j, _ = cycles.begin(("i", "i_0"), "j", blocking=True)
            with cycles.executing("j", "j_0", [to_j]):
                _, refusal = cycles.begin(("j", "j_0"), "h", blocking=True)
                assert "closes the call cycle h -> i -> j -> h," in refusal
            cycles.end(to_j)
        cycles.end(to_i)
    with cycles.executing("i", "i_0", []), cycles.executing("h", "h_0", []):
        to_h, refusal = cycles.begin(("i", "i_0"), "h", blocking=True)
        assert refusal == ""  # h_0 computes, not blocked
        _, refusal = cycles.begin(("h", "h_0"), "i", blocking=True)
        assert "closes the call cycle h -> i -> h," in refusal
        cycles.end(to_h)


def test_a_closed_instance_takes_its_calls_with_it() -> None:
    """A caller that went away in a call (a stub that died) leaves no blocked call behind
    for a later instance of the same name."""
    cycles = registry("p_0", "q_0")
    with cycles.executing("p", "p_0", []), cycles.executing("q", "q_0", []):
        cycles.begin(("p", "p_0"), "q", blocking=True)  # never ended
    cycles.remove_instance("p", "p_0")
    cycles.add_instance("p", "p_0")
    with cycles.executing("p", "p_0", []), cycles.executing("q", "q_0", []):
        call, refusal = cycles.begin(("q", "q_0"), "p", blocking=True)
        assert refusal == ""  # p_0 computes: the old call is gone
        cycles.end(call)


# (config.pbtxt text, whether a BLS request queued there expires): the cases of the backend's
# TestQueueExpiresReadsTheQueuePolicies.
EXPIRING = "default_timeout_microseconds: 9"
QUEUE_POLICIES = [
    ("", False),
    ("dynamic_batching { }", False),
    ("dynamic_batching { default_queue_policy { allow_timeout_override: true } }", False),
    (f"dynamic_batching {{ default_queue_policy {{ {EXPIRING} }} }}", True),
    (f"dynamic_batching {{ default_queue_policy {{ {EXPIRING} timeout_action: REJECT }} }}", True),
    # DELAY moves an expired request back into the queue: it never fails.
    (f"dynamic_batching {{ default_queue_policy {{ {EXPIRING} timeout_action: DELAY }} }}", False),
    # With priority levels a BLS request waits at the default level, under its own policy.
    (
        "dynamic_batching { priority_levels: 2 default_priority_level: 2 "
        f"priority_queue_policy {{ key: 2 value {{ {EXPIRING} }} }} }}",
        True,
    ),
    (
        "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
        f"priority_queue_policy {{ key: 2 value {{ {EXPIRING} }} }} }}",
        False,
    ),
    (
        "dynamic_batching { priority_levels: 2 default_priority_level: 2 "
        f"default_queue_policy {{ {EXPIRING} }} "
        "priority_queue_policy { key: 2 value { max_queue_size: 4 } } }",
        False,
    ),
    (
        "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
        f"default_queue_policy {{ {EXPIRING} }} "
        "priority_queue_policy { key: 2 value { max_queue_size: 4 } } }",
        True,
    ),
    # Levels in the map without priority_levels are not used.
    (f"dynamic_batching {{ priority_queue_policy {{ key: 2 value {{ {EXPIRING} }} }} }}", False),
    ("sequence_batching { max_sequence_idle_microseconds: 1000 }", False),
]


@pytest.mark.parametrize("text,expires", QUEUE_POLICIES)
def test_which_queues_expire_a_waiting_call(text: str, expires: bool) -> None:
    assert queue_expires(parse_config(text)) is expires


def test_a_call_to_a_queue_that_expires_gets_tritons_answer_at_once() -> None:
    """The server would let it wait for the policy's timeout; the engines have no queue."""
    cycles = CallCycles()
    cycles.add_instance("e", "e_0", expires=True)
    with cycles.executing("e", "e_0", []):
        _, refusal = cycles.begin(("e", "e_0"), "e", blocking=True)
    assert refusal == QUEUE_EXPIRED
    assert refusal_error("e", refusal) == (ErrorCode.UNAVAILABLE, "Request timeout expired")
