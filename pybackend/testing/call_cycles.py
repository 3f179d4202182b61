"""BLS calls that could never be answered, in the offline engines, by the backend's rule
(csrc/backend/bls_cycles.cc; docs/reliability.md, "BLS call cycles"): a model whose
``execute`` makes a blocking BLS call to itself, or through other models back to itself,
while every instance that could answer it is itself blocked in such a call, would wait
forever. Under tritonserver our backend answers that call at once with an error response
naming the cycle and the fix; ModelHarness and StubModel answer it with the same text
instead of hanging until the test's timeout, and a cycle a free instance can serve runs.

Where the server lets a queued call end on its own (the target's queue policy has a timeout:
Triton answers "Request timeout expired"), the engines, which have no queue, answer at once:
with Triton's answer when the call itself goes to such a model, else with the refusal.

One registry per engine world (the in-process harnesses share one, StubModels another):
each knows the instances of its models, which are inside ``execute``, and the calls in
flight (who made them, whether the caller's execute thread blocks on them, which instance
serves them, the chain of models that led to the caller)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar

from ..utils.errors import ErrorCode
from .bls_responses import refused_text

InstanceKey = Tuple[str, str]  # (model, instance)
T = TypeVar("T")

#: Triton's answer to a request its queue policy's timeout expired.
QUEUE_EXPIRED = "Request timeout expired"


def queue_expires(config: Mapping[str, Any]) -> bool:
    """Whether Triton's queue for the model (its parsed config) fails a BLS request that
    waited too long: a dynamic batcher whose policy for it (the default queue policy, or the
    default priority level's where there are levels) has a default timeout and the REJECT
    action. A request's own ``timeout=`` never makes it expire without one (the backend's
    QueueExpires, csrc/backend/bls_cycles.h)."""
    batching = config.get("dynamic_batching")
    if not isinstance(batching, Mapping):
        return False
    policy = batching.get("default_queue_policy")
    levels = batching.get("priority_queue_policy")
    if _uint(batching.get("priority_levels")) > 0 and isinstance(levels, Mapping):
        default = _uint(batching.get("default_priority_level"))
        own = {_uint(k): v for k, v in levels.items()}.get(default)
        policy = own if own is not None else policy
    if not isinstance(policy, Mapping) or _uint(policy.get("default_timeout_microseconds")) == 0:
        return False
    return policy.get("timeout_action") not in ("DELAY", 1)  # DELAY only moves it back


def _uint(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


def refusal_error(callee: str, refusal: str) -> Tuple[ErrorCode, str]:
    """The error response the caller of a refused call gets (code, message): Triton's own
    for a queue that expires, the backend's refusal text otherwise."""
    if refusal == QUEUE_EXPIRED:
        return ErrorCode.UNAVAILABLE, QUEUE_EXPIRED  # Triton's, as our backend passes it on
    return ErrorCode.INTERNAL, refused_text(callee, refusal)


@dataclass(eq=False)
class Call:
    """A BLS call in flight."""

    caller: InstanceKey
    callee: str
    blocking: bool  # the caller's execute thread waits on it (exec(), with a timeout too)
    chain: List[str]  # the models that led to the caller, the caller last
    server: Optional[InstanceKey] = None  # the instance whose execute took its request
    detached: bool = False  # that execute ended without the answer: it comes later


@dataclass(eq=False)
class _Slot:
    busy: int = 0  # inside execute
    queue_expires: bool = False  # its model's queue policy has a timeout (queue_expires)
    thread: Optional[threading.Thread] = None  # the thread running its model's execute
    served: List[Call] = field(default_factory=list)  # the calls its execute serves


class CallCycles:
    """The registry of one engine world (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: Dict[str, Dict[str, _Slot]] = {}
        self._calls: List[Call] = []

    # ------------------------------------------------------------------ instances

    def add_instance(self, model: str, instance: str, expires: bool = False) -> None:
        """``expires``: the model's queue policy has a timeout (:func:`queue_expires`)."""
        with self._lock:
            self._models.setdefault(model, {}).setdefault(instance, _Slot()).queue_expires = expires

    def remove_instance(self, model: str, instance: str) -> None:
        """The instance closed: it is gone, and so are the calls it made (a stub that died in
        one never sees its answer), which would otherwise hold a later instance of that name."""
        with self._lock:
            instances = self._models.get(model, {})
            instances.pop(instance, None)
            if not instances:
                self._models.pop(model, None)
            self._calls = [c for c in self._calls if c.caller != (model, instance)]

    def route(self, model: str, targets: Sequence[T]) -> T:
        """Which of the model's started instances ``targets`` (each with ``instance_name``)
        a new call goes to: one outside ``execute`` where there is one, as the server's queue
        hands a request to a free instance; else the first."""
        with self._lock:
            slots = self._models.get(model, {})
            for target in targets:
                slot = slots.get(target.instance_name)  # type: ignore[attr-defined]
                if slot is None or slot.busy == 0:
                    return target
        return targets[0]

    @contextmanager
    def executing(
        self, model: str, instance: str, served: Sequence[Optional[Call]]
    ) -> Iterator[None]:
        """The instance is inside ``execute`` on the calling thread for the block, serving
        the BLS calls among ``served`` (the batch's requests' calls, None for the others)."""
        calls = [c for c in served if c is not None]
        with self._lock:
            # An instance closed meanwhile (an execute a timeout left running) counts nowhere.
            slot = self._models.get(model, {}).get(instance) or _Slot()
            slot.busy += 1
            slot.thread = threading.current_thread()
            for call in calls:
                call.server = (model, instance)
            slot.served = calls
        try:
            yield
        finally:
            with self._lock:
                slot.busy -= 1
                for call in calls:
                    call.detached = True  # if it is still in flight, it answers later
                if slot.busy == 0:
                    slot.served = []
                    slot.thread = None

    # ------------------------------------------------------------------ calls

    def in_execute_thread(self, model: str, instance: str) -> bool:
        """Whether the calling thread is the one running the instance's ``execute`` (a call
        it makes blocks that execute)."""
        with self._lock:
            slot = self._models.get(model, {}).get(instance)
            return slot is not None and slot.busy > 0 and slot.thread is threading.current_thread()

    def begin(self, caller: InstanceKey, callee: str, blocking: bool) -> Tuple[Call, str]:
        """Registers a call about to be made; with it the refusal text ("" when it may
        wait: it is then in flight until :meth:`end`; :data:`QUEUE_EXPIRED` where the server
        would let the call wait in the callee's queue until its policy's timeout)."""
        with self._lock:
            slot = self._models.get(caller[0], {}).get(caller[1])
            parent = slot.served[0].chain if slot is not None and slot.served else []
            call = Call(caller, callee, blocking, [*parent, caller[0]])
            self._calls.append(call)
            if not blocking or slot is None or slot.busy == 0 or self._callee_free(call):
                return call, ""
            free = self._can_free()
            if caller in free:
                return call, ""
            if any(s.queue_expires for s in self._models.get(callee, {}).values()):
                text = QUEUE_EXPIRED  # the server's answer once the queue gives up
            else:
                text = self._refusal(call, self._cycle(call, free))
            self._calls.remove(call)
            return call, text

    def end(self, call: Call) -> None:
        with self._lock:
            if call in self._calls:
                self._calls.remove(call)

    # ------------------------------------------------------------------ the rule

    def _callee_free(self, call: Call) -> bool:
        """The common answer without the fixpoint: the callee has an instance that can leave
        execute on its own (idle, or not blocked in a call), or is not a model of this world."""
        instances = self._models.get(call.callee)
        if not instances:
            return True
        blocked = {c.caller for c in self._calls if c.blocking and c.caller[0] == call.callee}
        return any(s.busy == 0 or (call.callee, n) not in blocked for n, s in instances.items())

    def _can_free(self) -> Set[InstanceKey]:
        """The instances that can still leave execute: the least fixpoint of "not inside
        execute, or not blocked in a call, or blocked in a call that something that can
        leave execute will answer". Everything outside it waits for good."""
        blocked_on = {c.caller: c for c in self._calls if c.blocking}
        free = {
            (m, n)
            for m, instances in self._models.items()
            for n, slot in instances.items()
            if slot.busy == 0 or (m, n) not in blocked_on
        }
        changed = True
        while changed:
            changed = False
            for key, call in blocked_on.items():
                if key in free:
                    continue
                if call.detached:
                    answerable = True
                elif call.server is not None:
                    answerable = call.server in free
                else:
                    instances = self._models.get(call.callee) or {}
                    answerable = not instances or any((call.callee, n) in free for n in instances)
                if answerable:
                    free.add(key)
                    changed = True
        return free

    def _cycle(self, call: Call, free: Set[InstanceKey]) -> List[str]:
        """The cycle as the models on it: from the caller's request chain when the callee is
        on it (a -> b -> a in the order the requests went), else by who waits on whom."""
        if call.callee in call.chain:
            return [*call.chain[call.chain.index(call.callee) :], call.callee]
        path = [call.caller[0]]
        nxt = call.callee
        for _ in range(len(self._models) + 1):
            if nxt in path:
                return [*path[path.index(nxt) :], nxt]
            path.append(nxt)
            waits = next(
                (
                    c
                    for c in self._calls
                    if c.blocking and c.caller[0] == nxt and c.caller not in free
                ),
                None,
            )
            if waits is None:
                break
            nxt = waits.server[0] if waits.server is not None else waits.callee
        return path

    def _refusal(self, call: Call, cycle: List[str]) -> str:
        m = call.callee
        count = len(self._models.get(m) or {})
        blocked = (
            f"the only instance of '{m}' is blocked in a BLS call"
            if count == 1
            else f"all {count} instances of '{m}' are blocked in BLS calls"
        )
        return (
            f"the BLS call from model '{call.caller[0]}' (instance '{call.caller[1]}') to model "
            f"'{m}' would wait forever: it closes the call cycle {' -> '.join(cycle)}, and "
            f"{blocked} on this cycle. Give '{m}' more instances than the cycle can hold "
            f"(instance_group [ {{ count: {count + 1} }} ] in its config.pbtxt), or call "
            "without a cycle."
        )


#: The StubModels' world (the in-process harnesses' registry is their transport's).
STUB_MODEL_CYCLES = CallCycles()
