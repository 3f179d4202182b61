"""When a sequence counts as ended by the server for a model's ``sequence_idle`` hook
(pybackend/stub/sequence_idle.py), case by case: the rule read from the config, the idle time
from the end of the sequence's last execute, no hook while a request of the sequence may
still wait in the server's queue (the instance busy; an execute that took every queued
request, or a free instance settled, ends that), async executes counted until their
coroutine ends. test_sequence_idle_calls.py: how the hook is called;
tests/testing/test_sequence_idle.py: through a real tritonserver and both offline engines."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List, Optional

import pytest
from idle_support import END, IDLE_S, START, Model, Request, sequences, wait_for

from pybackend.stub.sequence_idle import GRACE_S, IdleRule, IdleSequences, idle_rule


@pytest.mark.parametrize(
    "config,expected",
    [
        ({}, None),
        ({"sequence_batching": {"iterative_sequence": True}}, None),
        ({"sequence_batching": {}}, IdleRule(1.0, GRACE_S, True, 0)),  # the server's default
        (
            {
                "max_batch_size": 4,
                "sequence_batching": {"max_sequence_idle_microseconds": "300000"},
            },
            IdleRule(0.3, GRACE_S, True, 4),  # a uint64 as the server writes it: text
        ),
        (
            {
                "max_batch_size": 8,
                "sequence_batching": {
                    "max_sequence_idle_microseconds": 300000,
                    "oldest": {"max_queue_delay_microseconds": 100000},
                },
            },
            IdleRule(0.3, 0.1 + GRACE_S, False, 8),
        ),
        (  # a batch of a preferred size may have left requests queued
            {
                "max_batch_size": 8,
                "sequence_batching": {"oldest": {"preferred_batch_size": ["4", "2"]}},
            },
            IdleRule(1.0, GRACE_S, False, 2),
        ),
    ],
)
def test_the_rule_from_the_config(config: Any, expected: Optional[IdleRule]) -> None:
    assert idle_rule(config) == expected


def test_only_a_model_with_the_hook_behind_a_sequence_batcher_is_watched() -> None:
    config = {"sequence_batching": {}}
    args = ("w", print, asyncio.run, print)
    assert IdleSequences.of(Model(), config, *args) is not None
    assert IdleSequences.of(Model(), {"dynamic_batching": {}}, *args) is None
    assert IdleSequences.of(object(), config, *args) is None

    class NotCallable:
        sequence_idle = 3

    assert IdleSequences.of(NotCallable(), config, *args) is None


def test_an_idle_sequence_is_told_once_and_an_ended_one_never() -> None:
    model = Model()
    seqs = sequences(model.sequence_idle, idle_s=0.5)  # the two executes are closer
    seqs.execute(model.execute, [Request(7, START), Request(8, START), Request(0)])
    seqs.execute(model.execute, [Request(8, END), Request("", 0)])
    wait_for(lambda: model.calls == [7])
    time.sleep(0.6)
    assert model.calls == [7]
    seqs.close()


def test_the_idle_time_counts_from_the_end_of_the_last_execute() -> None:
    model = Model()
    seqs = sequences(model.sequence_idle)
    release = threading.Event()
    ran = threading.Thread(
        target=seqs.execute, args=(lambda reqs: release.wait(), [Request(5, START)])
    )
    ran.start()
    time.sleep(4 * IDLE_S)  # well past the idle time, but execute runs
    assert model.calls == []
    ended = time.monotonic()
    release.set()
    ran.join()
    wait_for(lambda: model.calls == [5])
    assert time.monotonic() - ended >= IDLE_S
    seqs.close()


def _busy(seqs: IdleSequences, request: Request) -> "tuple[threading.Thread, threading.Event]":
    """An execute of ``request`` that runs until the returned event is set."""
    release = threading.Event()
    thread = threading.Thread(target=seqs.execute, args=(lambda reqs: release.wait(), [request]))
    thread.start()
    return thread, release


def test_a_busy_instance_holds_the_hook_until_it_has_settled() -> None:
    """While another sequence's long execute runs, the server queues what comes for the
    idle sequence (its clock restarted there): the hook waits until the instance has been
    free for the settling time, in which the server hands such a request over."""
    model = Model()
    seqs = sequences(model.sequence_idle, settle_s=0.3)
    seqs.execute(model.execute, [Request(1, START)])
    thread, release = _busy(seqs, Request(2, START))
    time.sleep(IDLE_S + 0.3 + 0.2)  # sequence 1's times pass while the instance is busy
    release.set()
    thread.join()
    # Within the settling time the queued request of sequence 1 reaches execute.
    seqs.execute(model.execute, [Request(1)])
    assert model.calls == []
    wait_for(lambda: model.calls == [2, 1])
    seqs.close()


@pytest.mark.parametrize("batch", [1, 2], ids=["batch-of-one", "full-batch"])
def test_an_execute_that_took_every_queued_request_ends_the_wait(batch: int) -> None:
    """Executes back to back, never a settling time apart: sequence 1 is told once an
    execute that began after its idle time took every request the server held. The direct
    strategy's always do; the oldest strategy's when their batch is not full (a full one
    may have left requests queued)."""
    model = Model()
    seqs = sequences(model.sequence_idle, settle_s=10.0, always_drains=False, full_batch=2)
    seqs.execute(model.execute, [Request(1, START)])
    others = [Request(2, START), Request(3, START)][:batch]
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and not model.calls:
        seqs.execute(model.execute, others)
        time.sleep(IDLE_S / 5)
    assert model.calls == ([1] if batch == 1 else [])
    seqs.close()


def test_an_async_execute_counts_until_its_coroutine_ends() -> None:
    """The execute of an ``async def execute`` is its coroutine: no hook for the sequence it
    serves (nor, while the instance is not settled, for another) until the coroutine ends."""
    model = Model()
    seqs = sequences(model.sequence_idle)
    seqs.execute(model.execute, [Request(1, START)])
    release = asyncio.Event()

    async def serving(requests: List[Request]) -> List[None]:
        await release.wait()
        return [None]

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        coro = seqs.execute(serving, [Request(2, START)])
        running = asyncio.run_coroutine_threadsafe(coro, loop)
        time.sleep(6 * IDLE_S)  # both sequences' idle times pass while it awaits
        assert model.calls == []
        loop.call_soon_threadsafe(release.set)
        assert running.result(5) == [None]
        wait_for(lambda: model.calls == [1, 2])
    finally:
        seqs.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
