"""How a model's ``sequence_idle`` hook is called (pybackend/stub/sequence_idle.py): under the
lock a plain ``execute`` runs under, called off by a request of the sequence seen meanwhile,
a coroutine hook run to its end, a hook that raises or exits reported while the watch and
the model's event loop go on, and none once closing began. test_sequence_idle_rule.py: when
it is called."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, List

import pytest
from idle_support import IDLE_S, SETTLE_S, START, Model, Request, sequences, wait_for

from pybackend.stub.sequence_idle import IdleRule, IdleSequences


def test_the_hook_never_runs_while_execute_does() -> None:
    model = Model()
    seen_locked: List[bool] = []
    seqs = sequences(lambda cid: seen_locked.append(seqs.lock.locked()))
    seqs.execute(model.execute, [Request(1, START)])
    in_execute, release = threading.Event(), threading.Event()

    def long_execute(requests: List[Request]) -> None:
        in_execute.set()
        release.wait()

    other = threading.Thread(target=seqs.execute, args=(long_execute, [Request(2, START)]))
    other.start()
    in_execute.wait()
    time.sleep(4 * IDLE_S)  # sequence 1's idle time passes while the instance is busy
    assert seen_locked == []
    release.set()
    other.join()
    wait_for(lambda: len(seen_locked) == 2)
    assert seen_locked == [True, True]  # under the lock execute runs under
    seqs.close()


def test_a_request_of_the_sequence_seen_meanwhile_calls_the_hook_off() -> None:
    """The watcher took sequence 3 as ended; before its hook runs, a new START of id 3
    reaches execute (the client began it again): the model's new state must stay."""
    model = Model()
    restarted = threading.Event()
    seqs: IdleSequences

    def restart_first(fn: Callable[[], None]) -> None:
        if not restarted.is_set():
            seqs.execute(model.execute, [Request(3, START)])
            restarted.set()
        fn()

    seqs = sequences(model.sequence_idle, serialize=restart_first)
    seqs.execute(model.execute, [Request(3, START)])
    assert restarted.wait(5)
    assert model.calls == []  # called off; the new sequence is watched anew
    wait_for(lambda: model.calls == [3])  # and told once it idles in turn
    seqs.close()


def test_a_hook_that_raises_is_reported_and_the_watch_goes_on() -> None:
    reports: List[str] = []
    called: List[Any] = []

    def hook(cid: Any) -> None:
        called.append(cid)
        if cid == 1:
            raise KeyError(cid)

    seqs = sequences(hook, reports=reports)
    seqs.execute(lambda r: None, [Request(1, START)])
    wait_for(lambda: len(reports) == 1)
    seqs.execute(lambda r: None, [Request(2, START)])
    wait_for(lambda: called == [1, 2])
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

    seqs = sequences(hook, on_loop=on_loop)
    seqs.execute(lambda r: None, [Request("abc", START)])
    wait_for(lambda: done == ["abc"])
    seqs.close()


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
    seqs = IdleSequences(
        hook, IdleRule(IDLE_S, SETTLE_S, True, 0), True, print, on_loop, reports.append, "m"
    )
    seqs.execute(lambda r: None, [Request(4, START)])
    wait_for(lambda: len(reports) == 1)
    assert "raised" in reports[0] and "SystemExit: 3" in reports[0], reports[0]

    async def still_there() -> str:
        return "served"

    assert on_loop(still_there()) == "served"
    seqs.close()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_closing_waits_for_a_running_hook_and_ends_the_watch() -> None:
    started, release = threading.Event(), threading.Event()
    finished: List[Any] = []

    def hook(cid: Any) -> None:
        started.set()
        release.wait()
        finished.append(cid)

    seqs = sequences(hook)
    seqs.execute(lambda r: None, [Request(1, START), Request(2, START)])
    assert started.wait(5)
    threading.Timer(2 * IDLE_S, release.set).start()
    seqs.close()
    assert finished == [1]  # the running one ended before close returned; 2 never runs
    time.sleep(3 * IDLE_S)
    assert finished == [1]
    seqs.execute(lambda r: None, [Request(9, START)])  # after close: nothing is watched
    time.sleep(3 * IDLE_S)
    assert finished == [1]
