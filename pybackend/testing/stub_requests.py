"""The request side of a :class:`~pybackend.testing.stub_model.StubModel`: ``infer``,
``infer_stream`` and ``infer_batch`` as EXECUTEs to its stub process (one at a time, as the
backend sends them, timed into the statistics: stub_batches.py), the responses its senders
send (stub_sends.py), and cancellation. ``stub_model.py`` starts and stops the stub process
this side talks to."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..stub.returns import OutputMismatch, OutputRules
from ..utils.errors import ErrorCode, TritonModelException
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as RELEASE_RESCHEDULE
from ..utils.tensor import Tensor
from .abandoned_execute import AbandonedExecute
from .call_cycles import Call
from .cancel_watch import CancelWatch
from .harness_bounds import CALL_TIMEOUT_S
from .harness_errors import (
    InferError,
    NoResponse,
    TimedOut,
    decoupled_infer_refused,
    no_final,
    no_response,
    not_one_response,
)
from .inputs import as_input_array, check_inputs, parameters_json
from .model_dir import ModelOnDisk
from .outputs import array_mismatches, report_mismatches
from .outputs import requested_outputs as requested_outputs_of
from .results import Outputs
from .sequence import request_fields
from .stub_batches import StubBatches, admit_batch
from .stub_driver import StubDriver
from .stub_process import died_text
from .stub_sends import LiveStream, SendRoutes, response_outputs, stream_outputs, wait_sent

Inputs = Mapping[str, Any]


class StubRequests(ModelOnDisk):
    """Requests to the model's stub process (StubModel sets :attr:`_driver` while it runs)."""

    #: Seconds an execute may take before the stub is killed (None: no limit, as the
    #: backend's default execute-timeout-seconds=0).
    execute_timeout: Optional[float]
    #: What the stub wrote to its stdout and stderr, line by line.
    output: List[str]
    _driver: Optional[StubDriver]

    def __init__(self, model_dir: Union[str, Path], *, debug: str = "", **kwargs: Any) -> None:
        super().__init__(model_dir, **kwargs)
        self._debug = debug  # StubModel(debug=): the stub's debug mode, nothing bounded
        #: The execute a call's timeout left running, its RESULT awaited by a worker thread.
        self.abandoned = AbandonedExecute(self, "StubModel", self.cancel, debug)
        self._batches = StubBatches(self, self.abandoned, self._died)
        self._tokens = itertools.count(1)
        self._serving: Dict[int, Call] = {}  # token -> the BLS call its request is
        # Where each request's SENDs go (its live stream), and when they cancel it.
        self._routes = SendRoutes(self._checked, self.cancel, lambda: self._driver is not None)
        #: Outputs that differed from config.pbtxt in responses the server would pass on
        #: (each also an OutputMismatchWarning); see pybackend.stub.returns.
        self.output_mismatches: List[OutputMismatch] = []
        self._output_rules: Optional[OutputRules] = None

    def infer(
        self,
        inputs: Inputs,
        *,
        requested_outputs: Sequence[str] = (),
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        parameters: Optional[Mapping[str, Any]] = None,
        timeout: float = CALL_TIMEOUT_S,
        sequence_id: Union[int, str] = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
    ) -> Outputs:
        """One request; its outputs by name. An error response raises :class:`InferError`;
        no answer within ``timeout`` seconds of the call, NoResponse. The sequence arguments
        are tritonclient's (see :meth:`ModelHarness.request`). A decoupled model's is
        refused, as tritonserver refuses it: use :meth:`infer_stream`."""
        if self.decoupled:
            raise decoupled_infer_refused(self.model_name)
        responses = self._request(
            inputs,
            requested_outputs,
            request_id,
            request_fields(correlation_id, sequence_id, sequence_start, sequence_end),
            parameters,
            timeout,
            deadline=time.monotonic() + timeout,
            call="infer",
        )
        if len(responses) != 1:
            raise not_one_response(len(responses))
        return responses[0]

    def infer_stream(
        self,
        inputs: Inputs,
        timeout: float = CALL_TIMEOUT_S,
        cancel_after: Optional[int] = None,
        on_response: Optional[Callable[[Outputs], None]] = None,
        cancel_event: Optional[threading.Event] = None,
        **kwargs: Any,
    ) -> List[Outputs]:
        """A decoupled model's responses to one request, until the response sender's FINAL
        (waited for at most ``timeout`` seconds). ``cancel_after``, ``on_response``,
        ``cancel_event``: as :meth:`ModelHarness.infer_stream` (the stub's
        ``is_cancelled()`` asks this side)."""
        sequence = request_fields(
            kwargs.get("correlation_id", 0),
            kwargs.get("sequence_id", 0),
            kwargs.get("sequence_start", False),
            kwargs.get("sequence_end", False),
        )
        return self._request(
            inputs,
            kwargs.get("requested_outputs", ()),
            kwargs.get("request_id", ""),
            sequence,
            kwargs.get("parameters"),
            timeout,
            cancel_after,
            on_response,
            cancel_event,
            # As in-process and through the server, the timeout counts from the call,
            # execute included.
            deadline=time.monotonic() + timeout,
            call="infer_stream",
        )

    def _request(
        self,
        inputs: Inputs,
        requested: Sequence[str],
        request_id: str,
        sequence: Tuple[Union[int, str], int],
        parameters: Optional[Mapping[str, Any]],
        timeout: float,
        cancel_after: Optional[int] = None,
        on_response: Optional[Callable[[Outputs], None]] = None,
        cancel_event: Optional[threading.Event] = None,
        deadline: Optional[float] = None,
        call: str = "infer",
    ) -> List[Outputs]:
        driver = self._started()
        arrays = {k: as_input_array(v) for k, v in inputs.items()}
        requested = requested_outputs_of(self.config, requested, self.model_name)
        self.check_request(arrays, request_id)
        correlation_id, flags = sequence
        arrays.update(self.admit_sequence(correlation_id, flags))
        token = next(self._tokens)
        if cancel_after is not None:
            self._routes.cancel_after[token] = cancel_after
            if cancel_after <= 0:
                self.cancel(token)
        live = LiveStream(requested, on_response) if on_response is not None else None
        if live is not None:
            self._routes.live[token] = live.emit
        watch = CancelWatch(cancel_event, lambda: self.cancel(token))
        timed_out = False
        try:
            with watch:
                sent = self._execute(
                    driver,
                    token,
                    arrays,
                    requested,
                    request_id,
                    correlation_id,
                    parameters,
                    timeout,
                    live=live is not None,
                    flags=flags,
                    deadline=deadline,
                    call=call,
                )
                if live is not None:
                    sent = live.wait(sent, driver, timeout, self.model_name, self._died, deadline)
        except TimedOut:
            # As the server engine's client cancels a stream left without FINAL: the
            # request stays cancelled, for a model that checks is_cancelled() to stop.
            timed_out = True
            raise
        finally:
            self._routes.forget(token)
            if timed_out:
                self.cancel(token)
            else:
                driver.cancelled_tokens.discard(token)
        return stream_outputs(sent, requested, cancel_after is not None or watch.cancelled)

    def _started(self) -> StubDriver:
        if self._driver is None:
            raise TritonModelException(f"the stub model '{self.model_name}' is not started")
        return self._driver

    def check_request(self, arrays: Mapping[str, np.ndarray], request_id: str = "") -> None:
        """The server's checks of a request's inputs (raises :class:`InferError`)."""
        tensors = [Tensor(k, a) for k, a in arrays.items()]
        check_inputs(self.config, self.model_name, tensors, request_id)

    def stream_live(
        self,
        arrays: Dict[str, np.ndarray],
        emit: Callable[[Optional[Dict[str, Any]], bool], None],
        requested: Sequence[str] = (),
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        parameters: Optional[Mapping[str, Any]] = None,
        call: Optional[Call] = None,
    ) -> int:
        """Start a request whose responses go to ``emit(response, final)`` as the stub
        sends them (a BLS call's stream, ``call`` in the cycle registry); returns its token
        (for :meth:`cancel`)."""
        driver = self._started()
        requested = requested_outputs_of(self.config, requested, self.model_name)
        token = next(self._tokens)
        self._routes.live[token] = emit
        if call is not None:
            self._serving[token] = call  # the execute that takes the request serves it

        def run() -> None:
            try:
                sent = self._execute(
                    driver, token, arrays, requested, request_id, correlation_id, parameters,
                    0.0, live=True,
                )  # fmt: skip
            except InferError as e:
                sent = [{"error": (e.code, e.message), "outputs": {}}]
            except TritonModelException as e:  # refused behind an abandoned execute
                sent = [{"error": (ErrorCode.INTERNAL, str(e)), "outputs": {}}]
            finally:
                self._serving.pop(token, None)
            if sent and self._routes.live.pop(token, None) is not None:
                for i, resp in enumerate(sent):
                    emit(resp, i == len(sent) - 1)

        threading.Thread(target=run, name="stub-model-stream", daemon=True).start()
        return token

    def cancel(self, token: int) -> None:
        """The request's client cancelled: its ``is_cancelled()`` turns true."""
        if self._driver is not None:
            self._driver.cancelled_tokens.add(token)

    def _execute(
        self,
        driver: StubDriver,
        token: int,
        arrays: Dict[str, np.ndarray],
        requested: Sequence[str],
        request_id: str,
        correlation_id: Union[int, str],
        parameters: Optional[Mapping[str, Any]],
        timeout: float,
        live: bool = False,
        flags: int = 0,
        deadline: Optional[float] = None,
        call: str = "infer",
    ) -> List[Dict[str, Any]]:
        kwargs = {
            "token": token,
            "request_id": request_id,
            "correlation_id": correlation_id,
            "flags": flags,
            "parameters": parameters_json(parameters),
        }
        queued = time.monotonic_ns()
        while True:
            (item,) = self.abandoned.bounded(
                lambda: self._batches.run(
                    driver,
                    [arrays],
                    [requested],
                    [kwargs],
                    [queued],
                    self.execute_timeout,
                    [self._serving.get(token)],
                ),
                timeout,
                deadline,
                [token],
                lambda: self._call_timed_out(call, timeout, token),
            )
            if isinstance(item, InferError):
                raise item
            if item.get("release_flags") != RELEASE_RESCHEDULE:
                break
            # Released with RESCHEDULE: the same request (token, inputs, id) comes back in a
            # later execute, as the server's sequence batcher sends it again.
        if deadline is not None and time.monotonic() >= deadline:
            raise self._call_timed_out(call, timeout, token)  # an answer after it is too late
        if item.get("none"):
            # The sender answers: live, its sends went (and go) to emit already.
            sent = [] if live else self._sent(driver, token, timeout, deadline)
        else:
            sent = [item]
        return [self._checked(r) for r in sent]

    def _call_timed_out(self, call: str, timeout: float, token: int) -> InferError:
        """No answer within the ``call``'s timeout: ``infer_stream``'s NoFinal, or the
        NoResponse of ``infer`` and ``infer_batch``, as in-process."""
        if call == "infer_stream":
            return no_final(self.model_name, timeout, self._routes.sent_count.get(token, 0))
        what = (
            "the requests are cancelled, and execute runs on in the stub process; the "
            "StubModel refuses new requests until it returns"
        )
        return no_response(self.model_name, self.instance_name, call, timeout, what)

    def infer_batch(
        self,
        batch: Sequence[Inputs],
        *,
        requested_outputs: Sequence[str] = (),
        options: Optional[Sequence[Mapping[str, Any]]] = None,
        timeout: float = CALL_TIMEOUT_S,
    ) -> List[Union[Outputs, InferError]]:
        """As :meth:`ModelHarness.infer_batch`: one EXECUTE for the batch."""
        if self.decoupled:
            return [decoupled_infer_refused(self.model_name) for _ in batch]
        deadline = time.monotonic() + timeout
        driver = self._started()
        results: List[Any] = [None] * len(batch)
        admitted = admit_batch(
            self, batch, options, requested_outputs, self._tokens, self.check_request, results
        )
        if admitted:
            _, arrays_of, requested_of, kwargs_of, queued_of = (list(c) for c in zip(*admitted))
            tokens = [k["token"] for k in kwargs_of]
            try:
                items = self.abandoned.bounded(
                    lambda: self._batches.run(
                        driver, arrays_of, requested_of, kwargs_of, queued_of, self.execute_timeout
                    ),
                    timeout,
                    deadline,
                    tokens,
                    lambda: self._call_timed_out("infer_batch", timeout, tokens[0]),
                )
            except NoResponse as e:
                for i, *_ in admitted:
                    results[i] = e
                return results
            for (i, _, requested, kwargs, _), item in zip(admitted, items):
                if isinstance(item, InferError):
                    results[i] = item
                    continue
                try:
                    if item.get("none"):  # its response sender answered (once, with FINAL)
                        sent = self._sent(driver, kwargs["token"], timeout, deadline)
                        if len(sent) != 1:
                            raise not_one_response(len(sent))
                        item = sent[0]
                    results[i] = response_outputs(self._checked(item), requested)
                except InferError as e:
                    results[i] = e
        return results

    def _checked(self, resp: Dict[str, Any]) -> Dict[str, Any]:
        """``resp`` as the stub sent it: under PYBACKEND_STRICT_OUTPUTS, the stub already
        made an output that differs from the config an error; otherwise each such output
        is reported in :attr:`output_mismatches` and as an OutputMismatchWarning."""
        rules = self._output_rules
        if resp.get("error") is None and rules is not None and not rules.strict:
            report_mismatches(array_mismatches(rules, resp["outputs"]), self.output_mismatches)
        return resp

    def _sent(
        self, driver: StubDriver, token: int, timeout: float, deadline: Optional[float] = None
    ) -> List[Dict[str, Any]]:
        return wait_sent(driver, token, timeout, self.model_name, self._died, deadline)

    def _died(self, cause: Optional[BaseException]) -> str:
        return died_text(self.model_name, self.instance_name, self._driver, self.output, cause)
