"""The execute side of a :class:`~pybackend.testing.harness.ModelHarness`: requests as the
backend builds them, one ``execute`` at a time (a rescheduled request comes back), timed
into the statistics, and what each request's client gets by the stub's rules (the model's
response, the backend's error texts, or its sender's answer). The model's coroutines run
on an event loop thread of its own, as in the stub. ``harness.py`` loads and closes the
model this side runs."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union, cast

import numpy as np

from ..stub.returns import (
    RESCHEDULED,
    RESPONSE,
    UNANSWERED,
    OutputMismatch,
    OutputRules,
    ReturnRefused,
    judge_return,
)
from ..stub.tracebacks import format_exception
from ..utils.errors import ErrorCode, TritonError, TritonModelException
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_ALL as RELEASE_ALL
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as RELEASE_RESCHEDULE
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .harness_responses import filtered
from .inputs import check_inputs, parameters_json
from .model_dir import ModelOnDisk
from .outputs import report_mismatches
from .outputs import requested_outputs as requested_outputs_of
from .sequence import request_fields
from .statistics import ExecuteTimes
from .transport import harness_transport

if TYPE_CHECKING:  # pragma: no cover
    from .harness import ModelHarness

Inputs = Mapping[str, Any]


class HarnessExecute(ModelOnDisk):
    """Requests to the model in this process (ModelHarness sets :attr:`model` once its
    ``initialize`` ran, and back to None at close)."""

    #: The model's TritonPythonModel instance while the harness runs.
    model: Any

    def __init__(self, model_dir: Union[str, Path], **kwargs: Any) -> None:
        super().__init__(model_dir, **kwargs)
        self._transport = harness_transport()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_thread: Optional[threading.Thread] = None
        # token -> what the request's sender sent, and whether its FINAL came
        self._streams: Dict[int, List[InferenceResponse]] = {}
        self._done: Dict[int, bool] = {}
        self._cond = threading.Condition()
        self._execute_lock = threading.RLock()
        self._queued: Dict[int, int] = {}  # token -> when the request arrived (statistics)
        #: Outputs that differed from config.pbtxt in responses the server would pass on
        #: (each also an OutputMismatchWarning); see pybackend.stub.returns.
        self.output_mismatches: List[OutputMismatch] = []
        self._output_rules: Optional[OutputRules] = None

    def request(
        self,
        inputs: Inputs,
        *,
        requested_outputs: Sequence[str] = (),
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        parameters: Optional[Mapping[str, Any]] = None,
        sequence_id: Union[int, str] = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        queued_ns: Optional[int] = None,
    ) -> InferenceRequest:
        """An incoming request, as the backend builds it, with ``inputs`` as tensors.
        ``sequence_id``/``sequence_start``/``sequence_end`` as tritonclient's: the correlation
        id and flags, checked and given control inputs as the sequence batcher does.
        ``queued_ns``: when it arrived (``time.monotonic_ns()``; now by default), where its
        queue time in :attr:`statistics` starts."""
        tensors = [
            v if isinstance(v, Tensor) else Tensor(k, np.asarray(v)) for k, v in inputs.items()
        ]
        check_inputs(self.config, self.model_name, tensors, request_id)
        correlation_id, flags = request_fields(
            correlation_id, sequence_id, sequence_start, sequence_end
        )
        controls = self.admit_sequence(correlation_id, flags)
        tensors += [Tensor(name, value) for name, value in controls.items()]
        t = self._transport
        token = next(t.tokens)
        with t.lock:
            t.by_token[token] = cast("ModelHarness", self)  # what the harness always is
        self._queued[token] = queued_ns if queued_ns is not None else time.monotonic_ns()
        return InferenceRequest._incoming(
            token,
            request_id,
            correlation_id,
            tensors,
            requested_outputs_of(self.config, requested_outputs, self.model_name),
            flags,
            0,
            parameters_json(parameters),
            self.decoupled,
            self.model_name,
            self.version,
        )

    def execute(self, requests: Sequence[Union[Inputs, InferenceRequest]]) -> List[Any]:
        """One ``execute`` batch. Returns, per request, its ``InferenceResponse``: an error
        response when ``execute`` raised or returned something the backend refuses (the
        backend's texts), or ``None`` when it answers through its response sender
        (decoupled mode; see :meth:`stream`)."""
        if self.model is None:
            raise TritonModelException(f"the harness of '{self.model_name}' is not started")
        reqs = [r if isinstance(r, InferenceRequest) else self.request(r) for r in requests]
        out = self._execute_once(reqs)
        # A request released with RESCHEDULE comes back (the same request, its inputs and
        # id) in a later execute, until the model releases it for good.
        again = [i for i, r in enumerate(reqs) if r._release_flags == RELEASE_RESCHEDULE]
        while again:
            batch = [reqs[i] for i in again]
            for r in batch:
                r._release_flags = RELEASE_ALL
            for i, result in zip(again, self._execute_once(batch)):
                out[i] = result
            again = [i for i in again if reqs[i]._release_flags == RELEASE_RESCHEDULE]
        return out

    def _execute_once(self, reqs: List[InferenceRequest]) -> List[Any]:
        # One execute at a time, as the stub runs them (requests from several threads
        # queue here); re-entrant, so a model that calls itself through BLS runs the call
        # nested instead of hanging the test.
        with self._execute_lock:
            times = ExecuteTimes()
            out = self._execute_timed(reqs, times)
            self._record(reqs, out, times.finish())
        return out

    def _execute_timed(self, reqs: List[InferenceRequest], times: ExecuteTimes) -> List[Any]:
        try:
            with self._running():
                times.mark_inputs_ready()  # the requests are built: handing them over is all
                ret = self.model.execute(reqs)
                if inspect.iscoroutine(ret):
                    ret = self._run(ret)
                times.mark_returned()
            return self._responses(reqs, ret)
        except ReturnRefused as e:
            return self._failed(reqs, str(e))
        except Exception as e:  # noqa: BLE001 - model code may raise anything
            return self._failed(reqs, format_exception(e))

    def _record(self, reqs: List[InferenceRequest], out: List[Any], times: ExecuteTimes) -> None:
        """The execute in :attr:`statistics`, with the requests it finished (an error
        response fails its request; ``None``, its sender answers, completes it)."""
        outcomes = [
            (
                self._queued.pop(req._token, times.start),
                self.batch_size(t.shape() for t in req.inputs()),
                not (isinstance(resp, InferenceResponse) and resp.has_error()),
            )
            for req, resp in zip(reqs, out)
            if req._release_flags != RELEASE_RESCHEDULE
        ]
        self.statistics.record(times, outcomes)

    def _failed(self, reqs: List[InferenceRequest], message: str) -> List[Any]:
        """A failed batch: every request gets the error, except one whose sender already
        completed it (its FINAL went out first: the client has that answer)."""
        out: List[Any] = []
        for req in reqs:
            req._release_flags = RELEASE_ALL  # a failed request ends: no coming back
            if req._sender is not None:
                req._sender._close()
            sent = self._streams.get(req._token)
            if self._done.get(req._token):
                out.append(sent[0] if sent and not self.decoupled else None)
            else:
                out.append(self._error(message))
        return out

    def _responses(self, reqs: List[InferenceRequest], ret: Any) -> List[Any]:
        """What each request's client gets, by the stub's rules (stub/returns.py)."""
        out: List[Any] = []
        for req, (verdict, what) in zip(
            reqs, judge_return(ret, reqs, self.decoupled, self.instance_name)
        ):
            if verdict == RESPONSE:
                # A sender's FINAL that went out first completed the request already: the
                # server passes that response on and drops the returned one.
                sent = self._streams.get(req._token)
                out.append(sent[0] if sent and self._done.get(req._token) else what)
            elif verdict == UNANSWERED:
                out.append(self._error(what))
            elif verdict == RESCHEDULED or self.decoupled:
                out.append(None)  # it comes back, or its sender streams: the answer is to come
            else:
                out.append(self._sender_answer(req))
        return out

    def _sender_answer(self, req: InferenceRequest) -> InferenceResponse:
        """No response returned, and the model took the request's sender: it answers (also
        from a thread, after execute returned)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._done.get(req._token, False), 30.0):
                return self._error(
                    "execute returned no response for this request and its response sender "
                    "sent no FINAL within 30 s"
                )
            sent = self._streams.get(req._token) or [InferenceResponse()]
        return sent[0]

    def _error(self, message: str) -> InferenceResponse:
        text = f"Failed to process the request(s) for model '{self.instance_name}', message: "
        return InferenceResponse(error=TritonError(text + message, ErrorCode.INTERNAL))

    def _checked(self, resp: InferenceResponse, req: InferenceRequest) -> InferenceResponse:
        """``resp`` with the outputs Triton passes on (those requested), as the server's
        stub checks them (stub/returns.py): under PYBACKEND_STRICT_OUTPUTS a mismatch turns
        it into the error response; otherwise it passes, and each mismatch is reported in
        :attr:`output_mismatches` and as an OutputMismatchWarning."""
        resp = filtered(resp, req)
        rules = self._output_rules
        if rules is None:
            return resp
        checked = rules.check(resp)
        if not rules.strict:
            report_mismatches(checked.mismatches, self.output_mismatches)
        return checked.response

    def _running(self) -> "_Running":
        return _Running(self)

    def _run(self, coro: Any) -> Any:
        """Run a coroutine of the model on its event loop (one thread, like the stub's)."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="harness-loop", daemon=True)
            thread.start()
            self._loop, self._loop_thread = loop, thread
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


class _Running:
    """Marks the harness whose model code runs on this thread (for logs and BLS)."""

    def __init__(self, harness: HarnessExecute) -> None:
        self.harness = harness
        self.previous: Optional[HarnessExecute] = None

    def __enter__(self) -> None:
        local = self.harness._transport.local
        self.previous = getattr(local, "harness", None)
        local.harness = self.harness

    def __exit__(self, *exc: object) -> None:
        self.harness._transport.local.harness = self.previous
