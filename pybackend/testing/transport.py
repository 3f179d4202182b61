"""The transport pb_utils talks to under the offline harness: one per process, routing
what model code does (logs, response-sender sends, BLS calls, custom metrics) to the
harness that owns the request or the model."""

from __future__ import annotations

import itertools
import os
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

from ..stub.bls import BLS_ONLY_IN_EXECUTE
from ..utils.errors import TritonModelException
from ..utils.response import InferenceResponse
from ..utils.transport import Transport
from .bls_responses import BlsResponses, error_answer, fake_answer
from .call_cycles import CallCycles, refusal_error
from .metric_store import MetricError, MetricRecord, MetricStore, metric_refusal

if TYPE_CHECKING:  # pragma: no cover
    from ..utils.request import InferenceRequest
    from .harness import ModelHarness
    from .harness_streams import SenderStreams

FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL

#: A BLS fake: called with the request, returns its response (or, for a decoupled call,
#: the list of streamed responses).
BlsFake = Callable[["InferenceRequest"], Any]


@dataclass
class LogRecord:
    level: int  # pb_utils.Logger levels: 0 INFO, 1 WARNING, 2 ERROR, 3 VERBOSE
    filename: str
    line: int
    message: str


class HarnessTransport(Transport):
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.harnesses: List["ModelHarness"] = []
        self.fakes: Dict[str, BlsFake] = {}
        # token -> where its response sender's sends go (the streams of its harness)
        self.by_token: Dict[int, "SenderStreams"] = {}
        self.cancelled: Set[int] = set()  # tokens whose client cancelled
        self.tokens = itertools.count(1)
        self.local = threading.local()  # .harness: the one whose model runs on this thread
        #: The custom metrics of the models run in this process, as the server keeps them.
        self.metric_store = MetricStore()
        # family id -> the harness whose model created it: closing the harness removes the
        # family (as unloading does in the server) even where a reference cycle of the
        # model's keeps the MetricFamily object, whose __del__ would delete it, alive.
        self.family_owners: Dict[int, "ModelHarness"] = {}
        #: The harnesses' instances in execute and their BLS calls in flight: a call that
        #: could never be answered is refused, as the backend refuses it (call_cycles.py).
        self.cycles = CallCycles()

    # ------------------------------------------------------------------ routing

    def current(self) -> Optional["ModelHarness"]:
        h = getattr(self.local, "harness", None)
        if h is not None:
            return h
        with self.lock:
            return self.harnesses[-1] if len(self.harnesses) == 1 else None

    def _harness_of_file(self, filename: str) -> Optional["ModelHarness"]:
        """The harness whose model's code holds ``filename``: its version directory, or the
        python-based backend's directory that runs it; the first instance's where several
        run that model, none where models of different versions or names share the file
        (a runtime's)."""
        with self.lock:
            found = [
                h
                for h in self.harnesses
                if filename.startswith(str(h.runtime_dir or h.version_dir) + os.sep)
            ]
        return found[0] if len({h.version_dir for h in found}) == 1 else None

    def _owner_of_file(self, filename: str) -> Optional["ModelHarness"]:
        return self._harness_of_file(filename) or self.current()

    def _owner_of_stack(self) -> Optional["ModelHarness"]:
        """The harness whose model code is on this thread's stack: the thread's own mark,
        else the innermost frame of a model's file (a thread the model started while
        several harnesses run), else the only harness."""
        h = getattr(self.local, "harness", None)
        frame = sys._getframe(1)
        while h is None and frame is not None:
            h = self._harness_of_file(frame.f_code.co_filename)
            frame = frame.f_back  # type: ignore[assignment]
        return h or self.current()

    @property
    def model_dir(self) -> str:  # type: ignore[override]  # pb_utils.get_model_dir()
        """The version directory of the model whose code asks, as a stub process sets it
        once for its one model; empty outside any model, as with no stub."""
        h = self._owner_of_stack()
        return str(h.version_dir) if h is not None else ""

    # ------------------------------------------------------------------ Transport

    def log(self, level: int, filename: str, line: int, message: str) -> None:
        h = self._owner_of_file(filename)
        record = LogRecord(level, filename, line, message)
        if h is not None:
            h.logs.append(record)
        else:
            super().log(level, filename, line, message)

    def send_response(
        self, request: "InferenceRequest", response: Optional[InferenceResponse], flags: int
    ) -> None:
        with self.lock:
            streams = self.by_token.get(request._token)
        if streams is None:
            raise TritonModelException("this request does not belong to a running harness")
        streams.on_send(request, response, flags)

    def is_cancelled(self, request: "InferenceRequest") -> bool:
        with self.lock:
            return request._token in self.cancelled

    def bls_exec(self, request: "InferenceRequest", decoupled: bool) -> Any:
        caller = self.current()
        if caller is not None and caller.finalizing:
            raise TritonModelException(BLS_ONLY_IN_EXECUTE)  # as the stub does
        name = request._model_name
        with self.lock:
            fake = self.fakes.get(name)
            targets = [h for h in self.harnesses if h.model_name == name]
        if fake is not None:
            items = fake_answer(fake, request)
            if decoupled:
                return BlsResponses.of(items)
            return items[0] if items else InferenceResponse([])  # as a stub process sends it
        if not targets:
            return error_answer(not_ready_text(name), decoupled)
        cycles = self.cycles
        target = cycles.route(name, targets)
        if decoupled or caller is None:
            return target._serve_bls(request, decoupled, None)
        key = (caller.model_name, caller.instance_name)
        blocking = cycles.in_execute_thread(*key)  # a timeout= does not end it (call_cycles)
        call, refusal = cycles.begin(key, name, blocking)
        if refusal:
            code, message = refusal_error(name, refusal)
            return error_answer(message, False, code)
        try:
            return target._serve_bls(request, False, call)
        finally:
            cycles.end(call)

    def model_control(self, op: str, **kwargs: Any) -> Any:
        if op == "is_model_ready":
            name = kwargs.get("model_name", "")
            with self.lock:
                return name in self.fakes or any(h.model_name == name for h in self.harnesses)
        return super().model_control(op, **kwargs)

    @property
    def families(self) -> Dict[int, Tuple[str, str, int]]:
        """The live metric families by id (name, description, kind)."""
        return self.metric_store.families

    @property
    def metrics(self) -> Dict[int, MetricRecord]:
        """The series by id: one per family name and label set."""
        return self.metric_store.metrics

    def metric_family_new(self, name: str, description: str, kind: int) -> int:
        owner = self.current()
        try:
            fid = self.metric_store.family_new(name, description, kind)
        except MetricError as e:
            raise TritonModelException(self._refused(owner, str(e))) from None
        if owner is not None:
            with self.lock:
                self.family_owners[fid] = owner
        return fid

    def metric_family_delete(self, family_id: int) -> None:
        self.metric_store.family_delete(family_id)
        with self.lock:
            self.family_owners.pop(family_id, None)

    def forget_families_of(self, harness: "ModelHarness") -> None:
        """The families ``harness``'s model created, gone with it (its model closed)."""
        with self.lock:
            owned = [fid for fid, h in self.family_owners.items() if h is harness]
        for fid in owned:
            self.metric_family_delete(fid)

    def metric_new(
        self, family_id: int, labels: Dict[str, str], buckets: Optional[List[float]]
    ) -> int:
        return self.metric_store.metric_new(family_id, labels, buckets)

    def metric_op(self, op: str, metric_id: int, value: float) -> float:
        try:
            return self.metric_store.op(op, metric_id, value)
        except MetricError as e:
            raise TritonModelException(self._refused(self.current(), str(e))) from None

    @staticmethod
    def _refused(owner: Optional["ModelHarness"], message: str) -> str:
        """The server's refusal as the model reads it, naming its instance (as the backend
        names it in its reply to the stub)."""
        return metric_refusal(owner.instance_name, message) if owner is not None else message


def not_ready_text(name: str) -> str:
    """The error of a BLS call to a model the server does not have (as Triton words it)."""
    return (
        f"Model {name} - Error when running inference: Failed for execute the "
        f"inference request. Model '{name}' is not ready."
    )


_transport: Optional[HarnessTransport] = None
_previous: Optional[Transport] = None  # pb_utils' transport before a harness started


def harness_transport() -> HarnessTransport:
    """The process's harness transport (pb_utils uses it while a harness runs)."""
    global _transport
    if _transport is None:
        _transport = HarnessTransport()
    return _transport


def install(t: HarnessTransport) -> None:
    """A harness starts: pb_utils talks to ``t`` from now on."""
    global _previous
    from ..utils import transport as utils_transport

    if utils_transport.get_transport() is not t:
        _previous = utils_transport.set_transport(t)


def uninstall_if_idle(t: HarnessTransport) -> None:
    """The last harness closed: pb_utils gets its previous transport back (a plain
    ``import triton_python_backend_utils`` in the same process behaves as without us)."""
    global _previous
    from ..utils import transport as utils_transport

    with t.lock:
        idle = not t.harnesses
    if idle and _previous is not None and utils_transport.get_transport() is t:
        utils_transport.set_transport(_previous)
        _previous = None
