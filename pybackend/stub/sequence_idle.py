"""A model's ``sequence_idle(correlation_id)``: called once tritonserver's sequence batcher
has ended a sequence that got no request for ``max_sequence_idle_microseconds``.

The server ends such a sequence without any request the model could see (no END, no null
request: checked on 2.51 for the direct strategy with and without batching and for the
oldest strategy), so what the model keeps per sequence stays for good (server#5453,
server#6846). pybackend's extension: a model that defines the method is told, from the
instance; the original never calls it. One rule, here, for both engines that run model code:
the stub (dispatch.py) and the offline harness (harness_execute.py).

When: the server's clock for a sequence starts when a request of it reaches its queue, before
``execute``; a request waits there while the instance runs another ``execute``. So the hook
waits the idle time from the end of the last ``execute`` that had a request of the sequence,
and then for the instance to have been free for a settling time (the batcher's queue delay
and 50 ms), in which the server hands over whatever of the sequence it still queues: by then
the server has ended it, and a request of it without START is refused there, never reaching
the model. A request that ENDs the sequence ends its tracking (the model saw the END).

Where: never at the same time as the instance's ``execute`` (the hook holds the lock
``execute`` runs under); for an ``async def execute``, on the model's event loop, between its
coroutines' steps. An ``async def sequence_idle`` is run to its end. A hook that raises is
logged at ERROR with the model, the instance and its traceback; the sequence stays ended.
"""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple, Union

from .tracebacks import MODEL_ERRORS, ModelExit, exits_as_errors, format_exception

HOOK = "sequence_idle"
GRACE_S = 0.05
SEQUENCE_END = 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
CLOSE_WAIT_S = 5.0  # how long closing waits for a hook that is running

CorrelationId = Union[int, str]


def idle_times(config: Mapping[str, Any]) -> Optional[Tuple[float, float]]:
    """(idle time, settling time) in seconds for a model behind the sequence batcher (see the
    module's doc); None for any other (an iterative sequence is one request that comes back:
    nothing of it idles)."""
    batching = config.get("sequence_batching")
    if not isinstance(batching, Mapping) or batching.get("iterative_sequence"):
        return None
    idle_us = int(batching.get("max_sequence_idle_microseconds") or 0) or 1_000_000
    delay_us = 0
    for strategy in ("direct", "oldest"):
        part = batching.get(strategy)
        if isinstance(part, Mapping):
            delay_us = max(delay_us, int(part.get("max_queue_delay_microseconds") or 0))
    return idle_us / 1e6, delay_us / 1e6 + GRACE_S


class IdleSequences:
    """The sequences one instance has seen, and the thread that tells the model of those the
    server ended for being idle. ``serialize(fn)`` runs ``fn`` where the engine runs the
    instance's code (the stub: the calling thread; the harness: the instance's thread, between
    its calls); ``run_coroutine(coro)`` runs a coroutine on the model's event loop to its end;
    ``report(text)`` logs an error of the hook."""

    def __init__(
        self,
        hook: Callable[[CorrelationId], Any],
        times: Tuple[float, float],
        on_loop: bool,
        serialize: Callable[[Callable[[], None]], None],
        run_coroutine: Callable[[Any], Any],
        report: Callable[[str], None],
        where: str,
    ) -> None:
        self._hook = hook
        self._idle_s, self._settle_s = times
        self._on_loop = on_loop
        self._serialize = serialize
        self._run_coroutine = run_coroutine
        self._report = report
        self._where = where  # "model 'm', instance 'm_0'"
        #: Held around each ``execute`` and each hook call of a model with a plain execute.
        self.lock = threading.Lock()
        self._cv = threading.Condition()
        # Sequence -> when its last execute ended; in that order (an entry is moved to the
        # end when seen again), so the first is the next to go idle.
        self._last: Dict[CorrelationId, float] = {}
        # Ended by the server, hook not called yet: a request of it seen since (a new START
        # of the same id) cancels the call.
        self._pending: Set[CorrelationId] = set()
        self._executing = 0  # executes of the instance running now
        self._free_since = 0.0  # when the last one ended
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
        times = idle_times(config)
        if hook is None or not callable(hook) or times is None:
            return None
        on_loop = inspect.iscoroutinefunction(getattr(model, "execute", None))
        return cls(hook, times, on_loop, serialize, run_coroutine, report, where)

    # ------------------------------------------------------------------ execute side

    def execute(self, execute: Callable[[Any], Any], requests: List[Any]) -> Any:
        """``execute(requests)``, under the lock, with its sequences seen before (a hook of
        one of them not yet run is off) and after (their idle time starts at its end)."""
        with self.lock:
            self._seen(requests, 1)
            try:
                return execute(requests)
            finally:
                self._seen(requests, -1)

    def _seen(self, requests: Iterable[Any], executing: int) -> None:
        now = time.monotonic()
        with self._cv:
            self._executing += executing
            if executing < 0:
                self._free_since = now
            if self._closed:
                return
            for r in requests:
                cid = r._correlation_id
                if cid == 0 or cid == "":  # no sequence: the direct strategy's null requests
                    continue
                self._pending.discard(cid)
                self._last.pop(cid, None)
                if not r._flags & SEQUENCE_END:
                    self._last[cid] = now
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
        """The next sequence the server has ended, once it has (caller holds _cv)."""
        while not self._closed:
            if not self._last or self._executing:
                self._cv.wait()  # an execute's end notifies
                continue
            cid, last = next(iter(self._last.items()))
            due = max(last + self._idle_s, self._free_since) + self._settle_s
            wait = due - time.monotonic()
            if wait > 0:
                self._cv.wait(wait)
                continue
            del self._last[cid]
            self._pending.add(cid)
            return cid
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
        """No hook runs from here on (the model is finalized next); one running is waited
        for, up to CLOSE_WAIT_S."""
        with self._cv:
            self._closed = True
            self._cv.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT_S)
