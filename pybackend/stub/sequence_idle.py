"""A model's ``sequence_idle(correlation_id)``: called once tritonserver's sequence batcher
has ended a sequence that got no request for ``max_sequence_idle_microseconds``.

The server ends such a sequence without any request the model could see (no END, no null
request: checked on 2.51 for the direct strategy with and without batching and for the
oldest strategy), so what the model keeps per sequence stays for good (server#5453,
server#6846). pybackend's extension: a model that defines the method is told, from the
instance; the original never calls it. One rule, here, for both engines that run model code:
the stub (dispatch.py) and the offline harness (harness_execute.py).

When. The server's clock for a sequence restarts when a request of it reaches the server's
queue, before ``execute``; the request waits there while the instance runs other executes.
So a sequence counts as ended once its idle time (plus 50 ms for the server's own timer) has
passed since the end of the last ``execute`` that served it, and no request of it can still
be queued: an ``execute`` started since then took every request the server held (the direct
strategy hands over one per active sequence; the oldest strategy did when its batch was
smaller than its smallest preferred size, or than max_batch_size), or the instance has been
free for a settling time (the batcher's queue delay and 50 ms) in which the server would
have handed one over. A request that ENDs the sequence ends its tracking (the model saw the
END); one that comes meanwhile (a new START of the id) calls the hook off.

Where. A plain ``execute`` and the hook never run at the same time (the hook holds the lock
``execute`` runs under). With ``async def execute`` the hook runs on the model's event loop,
between the steps of its coroutines, never for a sequence one of them is serving (an execute
counts until its coroutine ends). An ``async def sequence_idle`` is run to its end. A hook
that raises is logged at ERROR with the model, the instance and its traceback; the sequence
stays ended.
"""

from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Set,
    Tuple,
    Union,
)

from ..utils import TRITONSERVER_REQUEST_FLAG_SEQUENCE_END as SEQUENCE_END
from ..utils import TRITONSERVER_REQUEST_FLAG_SEQUENCE_START as SEQUENCE_START
from .returns import runs_as_coroutine
from .tracebacks import MODEL_ERRORS, ModelExit, exits_as_errors, format_exception

HOOK = "sequence_idle"
GRACE_S = 0.05
# Closing (before finalize) waits this long for a hook that is running: a hook that hangs
# must not hold the unload for good (the backend bounds finalize on its own).
CLOSE_WAIT_S = 5.0

CorrelationId = Union[int, str]


@dataclass(frozen=True)
class IdleRule:
    """When a model's sequence counts as ended by the server (see the module's doc)."""

    idle_s: float  # max_sequence_idle_microseconds (the server's default: 1 s)
    settle_s: float  # the batcher's queue delay and GRACE_S
    always_drains: bool  # the direct strategy: each execute takes every queued sequence
    # The oldest strategy: a batch this big may have left requests queued (the model's
    # max_batch_size, or its smallest preferred batch size); a smaller one took them all.
    full_batch: int

    def drains(self, batch: int) -> bool:
        """Whether an execute of ``batch`` requests took every request the server held."""
        return self.always_drains or batch < self.full_batch


def idle_rule(config: Mapping[str, Any]) -> Optional[IdleRule]:
    """The rule for a model behind the sequence batcher; None for any other (an iterative
    sequence is one request that comes back: nothing of it idles)."""
    batching = config.get("sequence_batching")
    if not isinstance(batching, Mapping) or batching.get("iterative_sequence"):
        return None
    idle_us = int(batching.get("max_sequence_idle_microseconds") or 0) or 1_000_000
    delay_us = 0
    for strategy in ("direct", "oldest"):
        part = batching.get(strategy)
        if isinstance(part, Mapping):
            delay_us = max(delay_us, int(part.get("max_queue_delay_microseconds") or 0))
    oldest = batching.get("oldest")
    full_batch = int(config.get("max_batch_size") or 0)
    if isinstance(oldest, Mapping) and oldest.get("preferred_batch_size"):
        full_batch = min(int(n) for n in oldest["preferred_batch_size"])
    return IdleRule(
        idle_us / 1e6, delay_us / 1e6 + GRACE_S, not isinstance(oldest, Mapping), full_batch
    )


def _sequences_of(requests: Iterable[Any]) -> Iterator[Tuple[CorrelationId, int]]:
    """(correlation id, flags) of the requests that belong to a sequence (the direct
    strategy's null requests, correlation id 0, do not)."""
    for r in requests:
        cid = r._correlation_id
        if cid != 0 and cid != "":
            yield cid, r._flags


class IdleSequences:
    """The sequences one instance has seen, and the thread that tells the model of those the
    server ended for being idle. ``serialize(fn)`` runs ``fn`` where the engine runs the
    instance's code (the stub: the calling thread; the harness: the instance's thread, between
    its calls); ``run_coroutine(coro)`` runs a coroutine on the model's event loop to its end;
    ``report(text)`` logs an error of the hook."""

    def __init__(
        self,
        hook: Callable[[CorrelationId], Any],
        rule: IdleRule,
        on_loop: bool,
        serialize: Callable[[Callable[[], None]], None],
        run_coroutine: Callable[[Any], Any],
        report: Callable[[str], None],
        where: str,
    ) -> None:
        self._hook = hook
        self._rule = rule
        self._on_loop = on_loop
        self._serialize = serialize
        self._run_coroutine = run_coroutine
        self._report = report
        self._where = where  # "model 'm', instance 'm_0'"
        #: Held around each ``execute`` call and each hook call of a model with a plain
        #: execute.
        self.lock = threading.Lock()
        self._cv = threading.Condition()
        # Sequence -> when the last execute that served it ended; in that order (an entry is
        # moved to the end when seen again), so the first is the next to go idle.
        self._last: Dict[CorrelationId, float] = {}
        # Ended by the server, hook not called yet: a request of it seen since (a new START
        # of the same id) calls the hook off.
        self._pending: Set[CorrelationId] = set()
        # Sequences an execute is serving now (how many of its requests), and those of them
        # whose END it got.
        self._serving: Dict[CorrelationId, int] = {}
        self._ended_ids: Set[CorrelationId] = set()
        self._executing = 0  # executes running now (an async one until its coroutine ends)
        self._free_since = 0.0  # when the last one ended
        self._drained_at = 0.0  # when the last execute that took every queued request began
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    @classmethod
    def of(
        cls,
        model: Any,
        config: Mapping[str, Any],
        where: str,
        serialize: Callable[[Callable[[], None]], None],
        run_coroutine: Callable[[Any], Any],
        report: Callable[[str], None],
    ) -> Optional["IdleSequences"]:
        """For a model that defines the hook and sits behind the sequence batcher; else
        None (nothing is tracked, ``execute`` runs as it always did)."""
        hook = getattr(model, HOOK, None)
        rule = idle_rule(config)
        if hook is None or not callable(hook) or rule is None:
            return None
        on_loop = inspect.iscoroutinefunction(getattr(model, "execute", None))
        return cls(hook, rule, on_loop, serialize, run_coroutine, report, where)

    # ------------------------------------------------------------------ execute side

    def execute(self, execute: Callable[[Any], Any], requests: List[Any]) -> Any:
        """``execute(requests)`` under the lock, its sequences seen as it begins (a hook of
        one of them not yet run is called off) and as it ends (their idle time starts there):
        when it returns, or for a coroutine when the coroutine does."""
        with self.lock:
            self._began(requests)
            try:
                result = execute(requests)
            except BaseException:
                self._ended(requests)
                raise
            if runs_as_coroutine(result):
                return self._ending(result, requests)
            self._ended(requests)
            return result

    async def _ending(self, coro: Any, requests: List[Any]) -> Any:
        try:
            return await coro
        finally:
            self._ended(requests)

    def _began(self, requests: List[Any]) -> None:
        now = time.monotonic()
        with self._cv:
            self._executing += 1
            if self._rule.drains(len(requests)):
                self._drained_at = now
            if self._closed:
                return
            for cid, flags in _sequences_of(requests):
                # Served from now until its execute ends: not idle, and a hook of it not yet
                # run is off (the model sees the sequence again; a START begins it anew).
                self._pending.discard(cid)
                self._last.pop(cid, None)
                self._serving[cid] = self._serving.get(cid, 0) + 1
                if flags & SEQUENCE_START:
                    self._ended_ids.discard(cid)
                if flags & SEQUENCE_END:
                    self._ended_ids.add(cid)
            self._cv.notify()

    def _ended(self, requests: List[Any]) -> None:
        now = time.monotonic()
        with self._cv:
            self._executing -= 1
            self._free_since = now
            if self._closed:
                return
            for cid, _ in _sequences_of(requests):
                left = self._serving.get(cid, 1) - 1
                if left > 0:  # an async execute of another of its requests still runs
                    self._serving[cid] = left
                    continue
                self._serving.pop(cid, None)
                if cid in self._ended_ids:  # the model saw its END
                    self._ended_ids.discard(cid)
                    continue
                self._last[cid] = now  # its idle time starts
            if self._thread is None and self._last:
                self._thread = threading.Thread(
                    target=self._watch, name="pybackend-sequence-idle", daemon=True
                )
                self._thread.start()
            self._cv.notify()

    # ------------------------------------------------------------------ the watcher

    def _watch(self) -> None:
        while True:
            with self._cv:
                cid = self._next_idle()
                if cid is None:
                    return  # closed
            self._call(cid)

    def _next_idle(self) -> Optional[CorrelationId]:
        """The next sequence the server has ended, once nothing of it can be queued there
        (caller holds _cv)."""
        rule = self._rule
        while not self._closed:
            if not self._last:
                self._cv.wait()
                continue
            cid, last = next(iter(self._last.items()))
            ended_at = last + rule.idle_s + GRACE_S
            now = time.monotonic()
            if now < ended_at:
                self._cv.wait(ended_at - now)
                continue
            settled_at = self._free_since + rule.settle_s
            if self._drained_at >= ended_at or (not self._executing and now >= settled_at):
                del self._last[cid]
                self._pending.add(cid)
                return cid
            # An execute's start or end notifies; a free instance settles.
            self._cv.wait(None if self._executing else settled_at - now)
        return None

    def _still_pending(self, cid: CorrelationId) -> bool:
        with self._cv:
            if cid not in self._pending or self._closed:
                return False
            self._pending.discard(cid)
            return True

    def _call(self, cid: CorrelationId) -> None:
        try:
            if self._on_loop:
                self._on_its_loop(self._on_the_loop(cid))
            else:
                self._serialize(lambda: self._locked(cid))
        except MODEL_ERRORS as e:  # the model's hook may raise anything
            if isinstance(e, ModelExit):
                e = e.exc
            self._report(
                f"{HOOK}({cid!r}) of {self._where} raised (the server ended the sequence "
                f"after max_sequence_idle_microseconds; its state is the model's to drop, "
                f"and it stays ended): {format_exception(e)}"
            )

    def _locked(self, cid: CorrelationId) -> None:
        with self.lock:
            if self._still_pending(cid):
                result = self._hook(cid)
                if inspect.iscoroutine(result):
                    self._on_its_loop(result)

    def _on_its_loop(self, coro: Any) -> None:
        # SystemExit or KeyboardInterrupt raised in a coroutine would end the loop's thread
        # (and every coroutine of the model with it): carried as an error instead.
        self._run_coroutine(exits_as_errors(coro))

    async def _on_the_loop(self, cid: CorrelationId) -> None:
        if self._still_pending(cid):
            result = self._hook(cid)
            if inspect.iscoroutine(result):
                await result

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """No hook starts from here on (the model is finalized next); one running is waited
        for, up to CLOSE_WAIT_S."""
        with self._cv:
            self._closed = True
            self._cv.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT_S)
