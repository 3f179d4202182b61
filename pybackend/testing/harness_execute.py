"""The execute side of a :class:`~pybackend.testing.harness.ModelHarness`: requests as the
backend builds them, one ``execute`` at a time (a rescheduled request comes back), timed
into the statistics, and what each request's client gets by the stub's rules (the model's
response, the backend's error texts, or its sender's answer)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ..stub.failures import failed_requests_text
from ..stub.loader import no_execute_text
from ..stub.returns import (
    RESCHEDULED,
    RESPONSE,
    UNANSWERED,
    OutputMismatch,
    OutputRules,
    ReturnRefused,
    decoupled_return_text,
    judge_return,
    refused_by_async_decoupled,
    runs_as_coroutine,
)
from ..stub.sequence_idle import IdleSequences
from ..stub.tracebacks import MODEL_ERRORS, format_exception
from ..utils.errors import ErrorCode, TritonError, TritonModelException
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_ALL as RELEASE_ALL
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as RELEASE_RESCHEDULE
from ..utils.request import InferenceRequest
from ..utils.response import FailedRequestResponse, InferenceResponse
from ..utils.tensor import Tensor
from .abandoned_execute import AbandonedExecute
from .call_cycles import Call
from .harness_code import ModelCode
from .harness_drops import DropWatch
from .harness_errors import InferError, no_response
from .harness_responses import Requested, filtered
from .harness_streams import SenderStreams
from .inputs import as_input_array, check_inputs, parameters_json
from .model_dir import ModelOnDisk
from .outputs import report_mismatches
from .outputs import requested_outputs as requested_outputs_of
from .sequence import request_fields
from .statistics import ExecuteTimes
from .transport import HarnessTransport

Inputs = Mapping[str, Any]


class Executor:
    """Requests to the model in ``disk`` (its configuration and statistics, read as they are
    at each call: the configuration is completed at load), run by ``code``, whose senders'
    sends ``streams`` collects."""

    def __init__(
        self,
        disk: ModelOnDisk,
        code: ModelCode,
        streams: SenderStreams,
        transport: HarnessTransport,
    ) -> None:
        self._disk = disk
        self._code = code
        self._streams = streams
        self._transport = transport
        self._drops = DropWatch(streams)
        self._lock = threading.RLock()
        self._queued: Dict[int, int] = {}  # token -> when the request arrived (statistics)
        #: The execute a call's timeout left running on the instance's thread, if any.
        self.abandoned = AbandonedExecute(
            disk, "ModelHarness", streams.cancel, runs_on=code.thread_name
        )
        #: Outputs that differed from config.pbtxt in responses the server would pass on
        #: (each also an OutputMismatchWarning); see pybackend.stub.returns.
        self.output_mismatches: List[OutputMismatch] = []
        #: The stub's rules for what execute returns, once the configuration is complete.
        self.output_rules: Optional[OutputRules] = None
        #: The model's ``sequence_idle`` hook and what it tracks (None: it has none).
        self.sequences: Optional[IdleSequences] = None

    def watch_sequences(self, report: Callable[[str], None]) -> None:
        """Once the model is initialized: tell it of its sequences the server would have
        ended for being idle, as the stub does (pybackend/stub/sequence_idle.py); on the
        instance's thread, between the harness's calls."""
        code, disk = self._code, self._disk

        def between_calls(fn: Callable[[], None]) -> None:
            with self._lock:
                code.run_marked(fn)

        where = f"model '{disk.model_name}', instance '{disk.instance_name}'"
        self.sequences = IdleSequences.of(
            code.model, disk.config, where, between_calls, code.run, report
        )

    def stop_sequences(self) -> None:
        """At close, before ``finalize``: no ``sequence_idle`` call from here on."""
        if self.sequences is not None:
            self.sequences.close()
            self.sequences = None

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
        """:meth:`ModelHarness.request`."""
        disk = self._disk
        # As the stub-process engine and a client send them (text as UTF-8 BYTES).
        tensors = [
            v if isinstance(v, Tensor) else Tensor(k, as_input_array(v)) for k, v in inputs.items()
        ]
        check_inputs(disk.config, disk.model_name, tensors, request_id)
        params = parameters_json(parameters)  # refused here, before anything is held
        correlation_id, flags = request_fields(
            correlation_id, sequence_id, sequence_start, sequence_end
        )
        controls = disk.admit_sequence(correlation_id, flags)
        tensors += [Tensor(name, value) for name, value in controls.items()]
        t = self._transport
        token = next(t.tokens)
        with t.lock:
            t.by_token[token] = self._streams  # its sender's sends come to this model
        self._queued[token] = queued_ns if queued_ns is not None else time.monotonic_ns()
        return InferenceRequest._incoming(
            token,
            request_id,
            correlation_id,
            tensors,
            requested_outputs_of(disk.config, requested_outputs, disk.model_name),
            flags,
            0,
            params,
            disk.decoupled,
            disk.model_name,
            disk.version,
        )

    def never_executed(self, req: InferenceRequest) -> None:
        """``req`` was refused before execute: it stays out of the statistics."""
        self._queued.pop(req._token, None)

    def execute(
        self,
        requests: Sequence[Union[Inputs, InferenceRequest]],
        calls: Optional[Mapping[int, Call]] = None,
    ) -> List[Any]:
        """:meth:`ModelHarness.execute`; ``calls``: the BLS calls among the requests, by token
        (the execute that takes them serves them, for the cycle registry)."""
        if self._code.model is None:
            raise TritonModelException(f"the harness of '{self._disk.model_name}' is not started")
        reqs = [r if isinstance(r, InferenceRequest) else self.request(r) for r in requests]
        calls = calls or {}
        out = self._execute_once(reqs, calls)
        # A request released with RESCHEDULE comes back (the same request, its inputs and
        # id) in a later execute, until the model releases it for good.
        again = [i for i, r in enumerate(reqs) if r._release_flags == RELEASE_RESCHEDULE]
        while again:
            batch = [reqs[i] for i in again]
            for r in batch:
                r._release_flags = RELEASE_ALL
            for i, result in zip(again, self._execute_once(batch, calls)):
                out[i] = result
            again = [i for i in again if reqs[i]._release_flags == RELEASE_RESCHEDULE]
        return out

    def _execute_once(self, reqs: List[InferenceRequest], calls: Mapping[int, Call]) -> List[Any]:
        # One execute at a time, as the stub runs them (requests from several threads
        # queue here). A blocking BLS call that would wait here for the execute it is made
        # from never comes: the cycle registry answers it (call_cycles.py), as the backend.
        self.abandoned.refuse_behind()
        with self._lock, self.abandoned.running():
            times = ExecuteTimes()
            out = self._execute_timed(reqs, times, calls)
            self._record(reqs, out, times.finish())
        return out

    def execute_bounded(self, reqs: List[InferenceRequest], timeout: float, call: str) -> List[Any]:
        """:meth:`execute` of ``reqs`` within ``timeout`` seconds (AbandonedExecute.bounded);
        past it the ``call``'s NoResponse."""
        disk = self._disk

        def timed_out() -> InferError:
            what = (
                "the requests are cancelled, and execute runs on in its daemon thread "
                "(ExecuteStillRunningWarning); the harness refuses new requests until it returns"
            )
            return no_response(disk.model_name, disk.instance_name, call, timeout, what)

        deadline = time.monotonic() + timeout
        tokens = [r._token for r in reqs]
        return self.abandoned.bounded(
            lambda: self.execute(reqs), timeout, deadline, tokens, timed_out
        )

    def _execute_timed(
        self, reqs: List[InferenceRequest], times: ExecuteTimes, calls: Mapping[int, Call]
    ) -> List[Any]:
        code, disk = self._code, self._disk
        served = [calls.get(r._token) for r in reqs]  # the BLS calls this execute serves
        ran_async = False

        def run() -> Any:
            nonlocal ran_async
            times.mark_inputs_ready()  # the requests are built: handing them over is all
            with self._transport.cycles.executing(disk.model_name, disk.instance_name, served):
                seqs = self.sequences
                execute = code.model.execute
                result = execute(reqs) if seqs is None else seqs.execute(execute, reqs)
                ran_async = runs_as_coroutine(result)  # the stub's rule
                ret = code.run(result) if ran_async else result
            times.mark_returned()
            return ret

        if getattr(code.model, "execute", None) is None:  # loads, then fails each batch
            return self._failed(reqs, no_execute_text(self._disk.model_file))
        try:
            ret = code.run_marked(run)  # the instance's own thread, when it has one
            if ran_async and self._disk.decoupled and ret is not None:
                return self._async_decoupled_ended(
                    reqs, decoupled_return_text(self._disk.instance_name)
                )
            return self._responses(reqs, ret)
        except ReturnRefused as e:
            return self._failed(reqs, str(e))
        except MODEL_ERRORS as e:  # model code may raise anything
            if ran_async and self._disk.decoupled:
                return self._async_decoupled_ended(reqs, format_exception(e))
            return self._failed(reqs, format_exception(e))

    def _record(self, reqs: List[InferenceRequest], out: List[Any], times: ExecuteTimes) -> None:
        """The execute in the statistics, with the requests it finished (an error of the
        backend's fails its request; the model's own error response is its answer;
        ``None``, its sender answers, completes it)."""
        outcomes = [
            (
                self._queued.pop(req._token, times.start),
                self._disk.batch_size(t.shape() for t in req.inputs()),
                not isinstance(resp, FailedRequestResponse),
            )
            for req, resp in zip(reqs, out)
            if req._release_flags != RELEASE_RESCHEDULE
        ]
        self._disk.statistics.record(times, outcomes)

    def _failed(self, reqs: List[InferenceRequest], message: str) -> List[Any]:
        """A failed batch: every request gets the error, except one whose sender already
        completed it (its FINAL went out first: the client has that answer)."""
        out: List[Any] = []
        for req in reqs:
            req._release_flags = RELEASE_ALL  # a failed request ends: no coming back
            if req._sender is not None:
                req._sender._close()
            if self._streams.completed(req._token):
                sent = self._streams.final_answer(req._token)
                out.append(None if self._disk.decoupled else sent)
            else:
                out.append(self.error(message))
        return out

    def _async_decoupled_ended(self, reqs: List[InferenceRequest], message: str) -> List[Any]:
        """A decoupled coroutine raised or returned a value (``message``): the requests
        nobody can answer fail (stub/returns.py refused_by_async_decoupled); a sender the
        model took stays open for a task or thread to answer, and if it is dropped without
        FINAL its client gets the error (the stub's StubState.fail_on_drop)."""
        ending = refused_by_async_decoupled(reqs)
        errors = {id(r): e for r, e in zip(ending, self._failed(ending, message))}
        for req in reqs:
            sender = req._sender
            if sender is not None and not sender._closed:
                self._drops.watch(req, sender, self.error(message))
        return [errors.get(id(r)) for r in reqs]

    def _responses(self, reqs: List[InferenceRequest], ret: Any) -> List[Any]:
        """What each request's client gets, by the stub's rules (stub/returns.py)."""
        decoupled = self._disk.decoupled
        out: List[Any] = []
        for req, (verdict, what) in zip(
            reqs, judge_return(ret, reqs, decoupled, self._disk.instance_name)
        ):
            if verdict == RESPONSE:
                # A sender's FINAL that went out first completed the request already: the
                # server passes that response on and drops the returned one.
                sent = self._streams.final_answer(req._token)
                out.append(what if sent is None else sent)
            elif verdict == UNANSWERED:
                out.append(self.error(what))
            elif verdict == RESCHEDULED or decoupled:
                out.append(None)  # it comes back, or its sender streams: the answer is to come
            else:
                out.append(self._sender_answer(req))
        return out

    def _sender_answer(self, req: InferenceRequest) -> InferenceResponse:
        """No response returned, and the model took the request's sender: it answers (also
        from a thread, after execute returned)."""
        sent = self._streams.wait_final(req._token, 30.0)
        if sent is None:
            return self.error(
                "execute returned no response for this request and its response sender "
                "sent no FINAL within 30 s"
            )
        return sent[0] if sent else InferenceResponse()

    def error(self, message: str) -> InferenceResponse:
        """The error response of a request whose execute failed, in the backend's words."""
        text = failed_requests_text(self._disk.instance_name, message)
        return FailedRequestResponse(error=TritonError(text, ErrorCode.INTERNAL))

    def checked(self, resp: InferenceResponse, req: Requested) -> InferenceResponse:
        """:meth:`ModelHarness._checked`."""
        resp = filtered(resp, req)
        rules = self.output_rules
        if rules is None:
            return resp
        result = rules.check(resp)
        if not rules.strict:
            report_mismatches(result.mismatches, self.output_mismatches)
        return result.response
