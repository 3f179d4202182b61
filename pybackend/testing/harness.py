"""Run a ``model.py`` in this process, with the real pb_utils types and no server.

    with ModelHarness("model_repository/add_sub") as model:
        out = model.infer({"INPUT0": a, "INPUT1": b})     # {"OUTPUT0": ..., "OUTPUT1": ...}

The model is imported the way the stub imports it (its version directory and model
directory on ``sys.path``, relative imports of its siblings), ``auto_complete_config`` and
``initialize(args)`` get what Triton would give them, ``execute`` gets real
``InferenceRequest`` objects, and a failing ``execute`` turns into the error responses a
client would see, with the backend's texts. Decoupled models answer through their response
senders (also from threads, after ``execute`` returned): ``stream`` collects them. BLS calls
go to other harnesses started in the same process (by model name) or to fakes.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..stub import loader
from ..stub.async_execute import ConfigError
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
from ..utils.bytes_codec import serialize_to_bytes, split_bytes, to_object_array
from ..utils.errors import ErrorCode, TritonError, TritonModelException
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_ALL as RELEASE_ALL
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as RELEASE_RESCHEDULE
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .bls_responses import DECOUPLED_ONLY, BlsResponses, refused_text
from .cancel_watch import CancelWatch
from .config import complete
from .harness_errors import InferError
from .inputs import check_inputs, parameters_json
from .load_checks import refuse_like_server, run_warmup
from .model_dir import ModelOnDisk
from .outputs import report_mismatches
from .outputs import requested_outputs as requested_outputs_of
from .results import Outputs, parameters_from_json
from .sequence import request_fields
from .statistics import ExecuteTimes
from .transport import FINAL, BlsFake, LogRecord, harness_transport, install, uninstall_if_idle

Inputs = Mapping[str, Any]


class ModelHarness(ModelOnDisk):
    """One instance of the model in ``model_dir`` (``<model_dir>/<version>/model.py`` and
    ``<model_dir>/config.pbtxt``). ``config``: a dict instead of config.pbtxt (or on top of
    an absent one). ``bls``: fakes for models this one calls, by name."""

    def __init__(
        self,
        model_dir: Union[str, Path],
        *,
        version: Optional[int] = None,
        config: Optional[Dict[str, Any]] = None,
        model_name: Optional[str] = None,
        instance_name: Optional[str] = None,
        bls: Optional[Mapping[str, BlsFake]] = None,
        model_file: str = "model.py",
        auto_complete: bool = True,
    ) -> None:
        super().__init__(
            model_dir,
            version=version,
            config=config,
            model_name=model_name,
            instance_name=instance_name,
            model_file=model_file,
            auto_complete=auto_complete,
        )
        self.logs: List[LogRecord] = []
        self.model: Any = None
        self.finalizing = False  # close() runs finalize: BLS is refused (spec 2.3)
        self._fakes = dict(bls or {})
        self._transport = harness_transport()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_thread: Optional[threading.Thread] = None
        self._streams: Dict[int, List[InferenceResponse]] = {}
        self._done: Dict[int, bool] = {}
        self._cancel_after: Dict[int, int] = {}  # token -> responses before cancelling
        # token -> what takes the responses of a decoupled BLS call to this model
        self._listeners: Dict[int, Any] = {}
        self._cond = threading.Condition()
        self._execute_lock = threading.RLock()
        self._queued: Dict[int, int] = {}  # token -> when the request arrived (statistics)
        #: Outputs that differed from config.pbtxt in responses the server would pass on
        #: (each also an OutputMismatchWarning); see pybackend.stub.returns.
        self.output_mismatches: List[OutputMismatch] = []
        self._output_rules: Optional[OutputRules] = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> "ModelHarness":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> "ModelHarness":
        """Import model.py, run ``auto_complete_config`` (when defined) and ``initialize``."""
        t = self._transport
        with t.lock:
            t.harnesses.append(self)
            t.fakes.update(self._fakes)
        install(t)
        try:
            refuse_like_server(self.config, self.model_name)
            self._load()
        except BaseException:
            self.model = None  # initialize failed: no finalize, as in the server
            self.close()  # the process is as before: no harness left registered
            raise
        try:
            run_warmup(self)  # model_warmup, as the server runs it before the model is ready
        except BaseException:
            self.close()
            raise
        return self

    def _load(self) -> None:
        with self._running():
            module = self._import()
            try:  # the stub's loader, so its checks and texts are the ones a model meets
                cls = loader.model_class(module)
                if self.auto_complete and hasattr(cls, "auto_complete_config"):
                    init = {"model_config": json.dumps(self.config), "model_name": self.model_name}
                    completed = json.loads(loader.auto_complete(module, init))
                    self.config = complete(completed, self.model_name)
                else:  # the server completes every config (a batcher's preferred sizes)
                    self.config = complete(self.config, self.model_name)
                # The stub's rules for what execute returns (stub/returns.py).
                self._output_rules = OutputRules(self.config, self.instance_name)
            except (loader.LoadError, ConfigError) as e:
                raise TritonModelException(str(e)) from None
            self.model = cls()
            if hasattr(self.model, "initialize"):
                result = self.model.initialize(self.initialize_args())
                if inspect.iscoroutine(result):
                    self._run(result)

    def close(self) -> None:
        """``finalize``, then forget the model."""
        self.finalizing = True  # BLS is refused from here on, as in the stub
        if self.model is not None and hasattr(self.model, "finalize"):
            with self._running():
                result = self.model.finalize()
                if inspect.iscoroutine(result):
                    self._run(result)
        self.model = None
        if self._loop is not None:
            loop, thread = self._loop, self._loop_thread
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(5)
            if not loop.is_running():
                loop.close()
            self._loop = self._loop_thread = None
        t = self._transport
        with t.lock:
            if self in t.harnesses:
                t.harnesses.remove(self)
            for name in self._fakes:
                t.fakes.pop(name, None)
            for token in [k for k, h in t.by_token.items() if h is self]:
                del t.by_token[token]
        t.forget_families_of(self)
        uninstall_if_idle(t)

    def initialize_args(self) -> Dict[str, str]:
        """The ``args`` of ``initialize`` (spec: 7 string keys)."""
        kind = "CPU"
        groups = self.config.get("instance_group") or []
        if groups and str(groups[0].get("kind", "")).endswith("GPU"):
            kind = "GPU"
        return {
            "model_config": json.dumps(self.config),
            "model_instance_kind": kind,
            "model_instance_name": self.instance_name,
            "model_instance_device_id": "0",
            "model_repository": str(self.model_dir),
            "model_version": str(self.version),
            "model_name": self.model_name,
        }

    # ------------------------------------------------------------------ requests

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
            t.by_token[token] = self
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

    def infer_batch(
        self,
        batch: Sequence[Inputs],
        *,
        requested_outputs: Sequence[str] = (),
        options: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> List[Union[Outputs, InferError]]:
        """Several requests in one ``execute``, as the dynamic batcher hands them over.
        ``options``: per request, ``requested_outputs``, ``request_id``, ``parameters`` and
        ``queued_ns`` as :meth:`request` takes them. Per request: its outputs, or its error as an
        :class:`InferError` (returned, not raised: one request's error leaves the others'
        answers). A request the server would refuse gets that error and stays out of the
        batch, as in the server."""
        if self.decoupled:
            raise TypeError("infer_batch is for models that answer with one response")
        results: List[Any] = [None] * len(batch)
        admitted: List[Tuple[int, InferenceRequest]] = []
        for i, inputs in enumerate(batch):
            opts = {"requested_outputs": requested_outputs, **(options[i] if options else {})}
            try:
                admitted.append((i, self.request(inputs, **opts)))
            except InferError as e:
                results[i] = e
        if admitted:
            responses = self.execute([req for _, req in admitted])
            for (i, req), resp in zip(admitted, responses):
                try:
                    results[i] = _outputs(None if resp is None else self._checked(resp, req), req)
                except InferError as e:
                    results[i] = e
        return results

    def infer(self, inputs: Inputs, **kwargs: Any) -> Outputs:
        """One request; its outputs by name (only ``requested_outputs`` when given). An
        error response raises :class:`InferError` with its message."""
        req = self.request(inputs, **kwargs)
        if self.decoupled:
            responses = self.stream(req)
            if len(responses) != 1:
                raise InferError(f"the decoupled model sent {len(responses)} responses, not 1")
            return _outputs(self._checked(responses[0], req), req)
        (resp,) = self.execute([req])
        return _outputs(None if resp is None else self._checked(resp, req), req)

    def infer_stream(
        self,
        inputs: Inputs,
        timeout: float = 30.0,
        cancel_after: Optional[int] = None,
        on_response: Optional[Callable[[Outputs], None]] = None,
        cancel_event: Optional[threading.Event] = None,
        **kwargs: Any,
    ) -> List[Outputs]:
        """A decoupled model's responses to one request, as outputs by name (an error
        response raises :class:`InferError`); the same call as :class:`ServerModel`'s.

        ``cancel_after=n``: the client cancels once ``n`` responses came (``0``: at once);
        from then on ``is_cancelled()`` is true for the request and its sender. The model
        must still end the stream with FINAL; a CANCELLED error response ends it quietly.
        ``on_response``: called with each response's outputs as the model sends it (also
        from the model's threads), before this returns them all. ``cancel_event``: once
        set (by another thread), the client cancels, as with ``cancel_after``.
        ``kwargs``: as :meth:`request` (request id, sequence id and flags, ...)."""
        req = self.request(inputs, **kwargs)
        if cancel_after is not None:
            self._arm_cancel(req._token, cancel_after)
        watch = CancelWatch(cancel_event, lambda: self._cancel_token(req._token))
        try:
            with watch:
                if on_response is None:
                    responses = self.stream(req, timeout)
                else:
                    responses = self._stream_live(req, timeout, on_response)
        finally:
            with self._transport.lock:
                self._transport.cancelled.discard(req._token)
            self._cancel_after.pop(req._token, None)
        quiet = cancel_after is not None or watch.cancelled
        return stream_outputs([self._checked(r, req) for r in responses], req, quiet)

    def stream(
        self, inputs: Union[Inputs, InferenceRequest], timeout: float = 30.0
    ) -> List[InferenceResponse]:
        """A decoupled model's responses to one request, until the response sender's FINAL
        (waited for at most ``timeout`` seconds: senders may answer from threads)."""
        req = inputs if isinstance(inputs, InferenceRequest) else self.request(inputs)
        (ret,) = self.execute([req])
        if ret is not None:
            with self._cond:
                sent = list(self._streams.pop(req._token, []))
            # A model that is not decoupled answers once (returned, or sent with FINAL: then
            # ret is that response); a decoupled one's batch failed: what was sent, the error.
            return [ret] if not self.decoupled else sent + [ret]
        with self._cond:
            if not self._cond.wait_for(lambda: self._done.get(req._token, False), timeout):
                raise InferError(
                    f"no FINAL from the response sender of '{self.model_name}' within "
                    f"{timeout:g} s ({len(self._streams.get(req._token, []))} responses so far)"
                )
            return list(self._streams.pop(req._token, []))

    def _stream_live(
        self,
        req: InferenceRequest,
        timeout: float,
        on_response: Callable[[Outputs], None],
    ) -> List[InferenceResponse]:
        """:meth:`stream`, handing each response on as the model sends it (a listener
        takes them at the send, so a model that streams from inside ``execute`` is live)."""
        if not self.decoupled:  # its one answer comes when execute is done: nothing to stream
            responses = [self._checked(r, req) for r in self.stream(req, timeout)]
            for resp in responses:
                if not resp.has_error():
                    on_response(_outputs(resp, req))
            return responses
        token = req._token
        sent: List[InferenceResponse] = []
        final = threading.Event()

        def listen(resp: Optional[InferenceResponse], flags: int) -> None:
            if resp is not None:
                resp = self._checked(resp, req)
                sent.append(resp)
                if not resp.has_error():
                    on_response(_outputs(resp, req))
                if len(sent) == self._cancel_after.get(token):
                    self._cancel_token(token)
            if flags & FINAL:
                final.set()

        with self._cond:
            self._listeners[token] = listen
        (ret,) = self.execute([req])
        if ret is not None:  # a model's one response, or the error after what was sent
            with self._cond:
                self._listeners.pop(token, None)
            ret = self._checked(ret, req)
            if not ret.has_error():
                on_response(_outputs(ret, req))
            return sent + [ret]
        if not final.wait(timeout):
            with self._cond:
                self._listeners.pop(token, None)
            raise InferError(
                f"no FINAL from the response sender of '{self.model_name}' within "
                f"{timeout:g} s ({len(sent)} responses so far)"
            )
        return sent

    # ------------------------------------------------------------------ internals

    def _import(self) -> types.ModuleType:
        if not self.model_file.is_file():
            raise TritonModelException(loader.missing_file_text(self.model_file))
        for path in (str(self.version_dir), str(self.model_dir)):
            if path not in sys.path:
                sys.path.append(path)
        # A package of our own per model and version, so two models' "1/model.py" do not
        # share a module, and relative imports of the model's siblings work as in the stub.
        package = _package_of(self.version_dir)
        if package not in sys.modules:
            pkg = types.ModuleType(package)
            pkg.__path__ = [str(self.version_dir)]  # type: ignore[attr-defined]
            sys.modules[package] = pkg
        return importlib.import_module(f"{package}.{self.model_file.stem}")

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

    def _arm_cancel(self, token: int, after: int) -> None:
        if after <= 0:
            self._cancel_token(token)
        else:
            self._cancel_after[token] = after

    def _on_send(
        self, request: InferenceRequest, response: Optional[InferenceResponse], flags: int
    ) -> None:
        with self._cond:
            listener = self._listeners.get(request._token)
            if listener is not None:  # a decoupled BLS call's stream takes it as it comes
                listener(response, flags)
                if flags & FINAL:
                    del self._listeners[request._token]
                return
            if response is not None:
                sent = self._streams.setdefault(request._token, [])
                sent.append(response)
                if len(sent) == self._cancel_after.get(request._token):
                    # Before send() returns, as a client's cancel that arrived meanwhile.
                    self._cancel_token(request._token)
            if flags & FINAL:
                self._done[request._token] = True
            self._cond.notify_all()

    def _serve_bls(self, request: InferenceRequest, decoupled_call: bool) -> Any:
        """A BLS call from another model: the response (``decoupled_call``: the
        :class:`BlsResponses` as they come), with the server's texts for a call it refuses."""
        inputs = {t.name(): t for t in request.inputs()}
        try:
            req = self.request(
                inputs,
                requested_outputs=sorted(request.requested_output_names()),
                request_id=request.request_id(),
                correlation_id=request.correlation_id(),
                parameters=json.loads(request.parameters() or "{}"),
            )
        except InferError as e:
            return _refused(self.model_name, e.message, decoupled_call)
        if self.decoupled and not decoupled_call:
            self._queued.pop(req._token, None)  # never executed: not in the statistics
            return _refused(self.model_name, DECOUPLED_ONLY.format(self.model_name), False)
        if not self.decoupled:
            (resp,) = self.execute([req])
            resp = self._checked(resp, req)
            # The response comes with FINAL: a decoupled call to it yields just that one.
            return BlsResponses.of([resp], final_alone=False) if decoupled_call else resp
        stream = BlsResponses(cancel=lambda: self._cancel_token(req._token))
        with self._cond:
            self._listeners[req._token] = lambda resp, flags: stream.put(
                None if resp is None else self._checked(resp, req), bool(flags & FINAL)
            )

        def run() -> None:
            (ret,) = self.execute([req])
            if ret is not None:  # the batch failed after what it sent: the error ends it
                with self._cond:
                    self._listeners.pop(req._token, None)
                stream.put(ret, True)

        threading.Thread(target=run, name="harness-bls", daemon=True).start()
        return stream

    def _checked(self, resp: InferenceResponse, req: InferenceRequest) -> InferenceResponse:
        """``resp`` with the outputs Triton passes on (those requested), as the server's
        stub checks them (stub/returns.py): under PYBACKEND_STRICT_OUTPUTS a mismatch turns
        it into the error response; otherwise it passes, and each mismatch is reported in
        :attr:`output_mismatches` and as an OutputMismatchWarning."""
        resp = _filtered(resp, req)
        rules = self._output_rules
        if rules is None:
            return resp
        checked = rules.check(resp)
        if not rules.strict:
            report_mismatches(checked.mismatches, self.output_mismatches)
        return checked.response

    def _cancel_token(self, token: int) -> None:
        """The request's client cancelled: its ``is_cancelled()`` turns true."""
        with self._transport.lock:
            self._transport.cancelled.add(token)


def _package_of(version_dir: Path) -> str:
    return f"_pybackend_harness_{abs(hash(str(version_dir)))}"


def forget_imports(version_dir: Union[str, Path]) -> None:
    """Drop what the harness imported from ``version_dir`` (its model.py and siblings), so
    that the next harness of that model imports the files as they are now (a reload)."""
    package = _package_of(Path(version_dir).resolve())
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


class _Running:
    """Marks the harness whose model code runs on this thread (for logs and BLS)."""

    def __init__(self, harness: ModelHarness) -> None:
        self.harness = harness
        self.previous: Optional[ModelHarness] = None

    def __enter__(self) -> None:
        local = self.harness._transport.local
        self.previous = getattr(local, "harness", None)
        local.harness = self.harness

    def __exit__(self, *exc: object) -> None:
        self.harness._transport.local.harness = self.previous


def _filtered(resp: InferenceResponse, req: InferenceRequest) -> InferenceResponse:
    """Only the requested outputs, as Triton returns them (all when none are named)."""
    wanted = req.requested_output_names()
    if not wanted or resp.has_error():
        return resp
    kept = InferenceResponse([t for t in resp.output_tensors() if t.name() in wanted])
    kept._parameters = resp._parameters  # the response's parameters travel with it
    return kept


def _refused(model: str, message: str, decoupled_call: bool) -> Any:
    """A BLS call the server refuses before the model sees it: one error response."""
    error = InferenceResponse(error=TritonError(refused_text(model, message), ErrorCode.INTERNAL))
    return BlsResponses.of([error], final_alone=False) if decoupled_call else error


def stream_outputs(
    responses: List[InferenceResponse], req: InferenceRequest, cancelled: bool
) -> List[Outputs]:
    out = []
    for resp in responses:
        err = resp.error()
        if cancelled and err is not None and err.code() == ErrorCode.CANCELLED:
            break  # the model acknowledged the client's cancel: the stream ends here
        out.append(_outputs(resp, req))
    return out


def _outputs(resp: Optional[InferenceResponse], req: InferenceRequest) -> Outputs:
    if resp is None:
        raise InferError("no response")
    err = resp.error()
    if err is not None:
        raise InferError(err.message(), int(err.code()))
    kept = _filtered(resp, req)
    return Outputs(
        ((t.name(), _as_client_sees(t._host_copy())) for t in kept.output_tensors()),
        parameters_from_json(kept.parameters()),
    )


def _as_client_sees(array: np.ndarray) -> np.ndarray:
    """BYTES outputs as a client decodes them: an object array of bytes, whatever the model
    made them from (str objects, numpy 'S' or 'U' arrays)."""
    if array.dtype.kind not in "OSU":
        return array
    return to_object_array(split_bytes(serialize_to_bytes(array))).reshape(array.shape)
