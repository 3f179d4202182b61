"""What the sequence_idle tests (test_sequence_idle_rule.py, test_sequence_idle_calls.py)
share: requests as the rule reads them, a model that records its hook calls, and an
IdleSequences with short times."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, List, Optional

from pybackend.stub.sequence_idle import IdleRule, IdleSequences

IDLE_S = 0.05  # the idle time of these tests
SETTLE_S = 0.02  # how long a free instance settles
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


def here(fn: Callable[[], None]) -> None:
    """The stub's serialize: the hook on the watcher's own thread."""
    fn()


def sequences(
    hook: Callable[[Any], Any],
    serialize: Callable[[Callable[[], None]], None] = here,
    on_loop: bool = False,
    reports: Optional[List[str]] = None,
    idle_s: float = IDLE_S,
    settle_s: float = SETTLE_S,
    always_drains: bool = True,
    full_batch: int = 0,
    run_coroutine: Callable[[Any], Any] = asyncio.run,
) -> IdleSequences:
    return IdleSequences(
        hook,
        IdleRule(idle_s, settle_s, always_drains, full_batch),
        on_loop,
        serialize,
        run_coroutine,
        (reports if reports is not None else []).append,
        "model 'm', instance 'm_0'",
    )


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)
