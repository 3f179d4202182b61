"""The rule behind a model's ``sequence_idle`` hook (pybackend/stub/sequence_idle.py), case by
case: when a sequence counts as ended by the server, that the hook never runs while the
instance's ``execute`` does, that a request of the sequence seen meanwhile calls it off, and
what a hook that raises leaves. tests/testing/test_sequence_idle.py runs it through a real
tritonserver and both offline engines."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, List, Optional

import pytest

from pybackend.stub.sequence_idle import GRACE_S, IdleSequences, idle_times

AFTER_S = 0.05  # the idle time of these tests
SETTLE_S = 0.02  # how long the instance must have been free
START, END = 1, 2


class Request:
    def __init__(self, correlation_id: Any, flags: int = 0) -> None:
        self._correlation_id = correlation_id
        self._flags = flags


class Model:
    def __init__(self) -> None:
        self.calls: List[Any] = []

    def execute(self, requests: List[Request]) -> List[None]:
        return [None] * len(requests)

    def sequence_idle(self, correlation_id: Any) -> None:
        self.calls.append(correlation_id)


def _direct(fn: Callable[[], None]) -> None:
    fn()


def _sequences(
    hook: Callable[[Any], Any],
    serialize: Callable[[Callable[[], None]], None] = _direct,
    on_loop: bool = False,
    reports: Optional[List[str]] = None,
    after_s: float = AFTER_S,
    settle_s: float = SETTLE_S,
) -> IdleSequences:
    return IdleSequences(
        hook,
        (after_s, settle_s),
        on_loop,
        serialize,
        asyncio.run,
        (reports if reports is not None else []).append,
        "model 'm', instance 'm_0'",
    )


def _wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.mark.parametrize(
    "batching,expected",
    [
        (None, None),
        ({"iterative_sequence": True, "max_sequence_idle_microseconds": 5}, None),
        ({}, (1.0, GRACE_S)),  # the server's default idle time
        ({"max_sequence_idle_microseconds": "300000"}, (0.3, GRACE_S)),  # uint64 as text
        ({"max_sequence_idle_microseconds": 300000, "direct": {}}, (0.3, GRACE_S)),
        (
            {
                "max_sequence_idle_microseconds": 300000,
                "oldest": {"max_queue_delay_microseconds": 100000},
            },
            (0.3, 0.1 + GRACE_S),
        ),
    ],
)
def test_the_idle_and_settling_times(batching: Any, expected: Optional[tuple]) -> None:
    config = {} if batching is None else {"sequence_batching": batching}
    got = idle_times(config)
    assert got == expected if expected is None else got == pytest.approx(expected)


def test_only_a_model_with_the_hook_behind_a_sequence_batcher_is_watched() -> None:
    config = {"sequence_batching": {}}
    args = ("w", _direct, asyncio.run, print)
    assert IdleSequences.of(Model(), config, *args) is not None
    assert IdleSequences.of(Model(), {"dynamic_batching": {}}, *args) is None
    assert IdleSequences.of(object(), config, *args) is None

    class NotCallable:
        sequence_idle = 3

    assert IdleSequences.of(NotCallable(), config, *args) is None


def test_an_idle_sequence_is_told_once_and_an_ended_one_never() -> None:
    model = Model()
    seqs = _sequences(model.sequence_idle, after_s=0.5)  # the two executes are closer
    seqs.execute(model.execute, [Request(7, START), Request(8, START), Request(0)])
    seqs.execute(model.execute, [Request(8, END), Request("", 0)])
    _wait_for(lambda: model.calls == [7])
    time.sleep(0.6)
    assert model.calls == [7]
    seqs.close()


def test_the_idle_time_counts_from_the_end_of_the_last_execute() -> None:
    model = Model()
    seqs = _sequences(model.sequence_idle)
    release = threading.Event()
    ran = threading.Thread(
        target=seqs.execute, args=(lambda reqs: release.wait(), [Request(5, START)])
    )
    ran.start()
    time.sleep(4 * AFTER_S)  # well past the idle time, but execute runs
    assert model.calls == []
    ended = time.monotonic()
    release.set()
    ran.join()
    _wait_for(lambda: model.calls == [5])
    assert time.monotonic() - ended >= AFTER_S
    seqs.close()


def test_the_hook_waits_for_the_instance_to_have_been_free() -> None:
    """While the instance runs another sequence's long execute, the server queues what
    comes for an idle sequence (its clock restarted): the hook waits until the instance has
    been free for the settling time, by when the server has handed such a request over."""
    model = Model()
    seqs = _sequences(model.sequence_idle, settle_s=0.3)  # the next execute comes sooner
    seqs.execute(model.execute, [Request(1, START)])
    release = threading.Event()
    busy = threading.Thread(
        target=seqs.execute, args=(lambda reqs: release.wait(), [Request(2, START)])
    )
    busy.start()
    time.sleep(AFTER_S + 0.3 + 0.2)  # sequence 1's times pass while the instance is busy
    assert model.calls == []
    release.set()
    busy.join()
    freed = time.monotonic()
    # Within the settling time a request of sequence 1 reaches execute: nothing to tell.
    seqs.execute(model.execute, [Request(1)])
    _wait_for(lambda: sorted(model.calls) == [1, 2])
    assert time.monotonic() - freed >= AFTER_S  # sequence 1 idled anew from there


def test_the_hook_never_runs_while_execute_does() -> None:
    model = Model()
    seen_locked: List[bool] = []
    seqs = _sequences(lambda cid: seen_locked.append(seqs.lock.locked()))
    seqs.execute(model.execute, [Request(1, START)])
    in_execute, release = threading.Event(), threading.Event()

    def long_execute(requests: List[Request]) -> None:
        in_execute.set()
        release.wait()

    other = threading.Thread(target=seqs.execute, args=(long_execute, [Request(2, START)]))
    other.start()
    in_execute.wait()
    time.sleep(4 * AFTER_S)  # sequence 1 is due; its hook waits for the lock
    assert seen_locked == []
    release.set()
    other.join()
    _wait_for(lambda: len(seen_locked) == 2)
    assert seen_locked == [True, True]  # under the lock execute runs under
    seqs.close()


def test_a_request_of_the_sequence_seen_meanwhile_calls_the_hook_off() -> None:
    """The watcher took sequence 3 as ended; before its hook runs, a new START of id 3
    reaches execute (the client began it again): the model's new state must stay."""
    model = Model()
    seqs: IdleSequences

    def restart_first(fn: Callable[[], None]) -> None:
        seqs.execute(model.execute, [Request(3, START)])
        fn()

    seqs = _sequences(model.sequence_idle, serialize=restart_first)
    seqs.execute(model.execute, [Request(3, START)])
    time.sleep(3 * AFTER_S)
    assert model.calls == []  # called off; the new sequence is watched again
    seqs.close()


def test_a_hook_that_raises_is_reported_and_the_watch_goes_on() -> None:
    reports: List[str] = []
    called: List[Any] = []

    def hook(cid: Any) -> None:
        called.append(cid)
        if cid == 1:
            raise KeyError(cid)

    seqs = _sequences(hook, reports=reports)
    seqs.execute(lambda r: None, [Request(1, START)])
    _wait_for(lambda: len(reports) == 1)
    seqs.execute(lambda r: None, [Request(2, START)])
    _wait_for(lambda: called == [1, 2])
    assert reports[0].startswith(
        "sequence_idle(1) of model 'm', instance 'm_0' raised (the server ended the sequence "
        "after max_sequence_idle_microseconds; its state is the model's to drop, and it stays "
        "ended): KeyError: 1\n\nAt:\n"
    )
    assert len(reports) == 1
    seqs.close()


@pytest.mark.parametrize("on_loop", [False, True], ids=["plain-execute", "async-execute"])
def test_a_coroutine_hook_runs_to_its_end(on_loop: bool) -> None:
    done: List[Any] = []

    async def hook(cid: Any) -> None:
        await asyncio.sleep(0)
        done.append(cid)

    seqs = _sequences(hook, on_loop=on_loop)
    seqs.execute(lambda r: None, [Request("abc", START)])
    _wait_for(lambda: done == ["abc"])
    seqs.close()


def test_closing_waits_for_a_running_hook_and_ends_the_watch() -> None:
    started, release = threading.Event(), threading.Event()
    finished: List[Any] = []

    def hook(cid: Any) -> None:
        started.set()
        release.wait()
        finished.append(cid)

    seqs = _sequences(hook)
    seqs.execute(lambda r: None, [Request(1, START), Request(2, START)])
    started.wait(5)
    threading.Timer(2 * AFTER_S, release.set).start()
    seqs.close()
    assert finished == [1]  # the running one ended before close returned; 2 never runs
    time.sleep(3 * AFTER_S)
    assert finished == [1]
    seqs.execute(lambda r: None, [Request(9, START)])  # after close: nothing is watched
    time.sleep(3 * AFTER_S)
    assert finished == [1]


def test_a_hook_that_exits_on_the_loop_leaves_the_loop_serving() -> None:
    """SystemExit raised in a coroutine would end the event loop's thread, and every
    coroutine of the model with it: it is reported as the hook's error instead."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def on_loop(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    async def hook(cid: Any) -> None:
        raise SystemExit(3)

    reports: List[str] = []
    seqs = IdleSequences(hook, (AFTER_S, SETTLE_S), True, _direct, on_loop, reports.append, "m")
    seqs.execute(lambda r: None, [Request(4, START)])
    _wait_for(lambda: len(reports) == 1)
    assert "raised" in reports[0] and "SystemExit: 3" in reports[0], reports[0]

    async def still_there() -> str:
        return "served"

    assert on_loop(still_there()) == "served"
    seqs.close()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()
