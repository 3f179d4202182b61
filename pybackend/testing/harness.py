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

ModelHarness is the model on disk (its configuration, statistics) and the parts it owns,
each holding its own state: :class:`ModelCode` (harness_code.py: the model instance and its
event loop), :class:`SenderStreams` and :class:`StreamCalls` (harness_streams.py: what
response senders send, ``stream``, ``infer_stream``), :class:`Executor`
(harness_execute.py: requests and ``execute``) and :class:`BlsServer` (harness_bls.py: BLS
calls from other models). This module loads and closes the model and holds the calls.
The calls the three engines share are stated once in :mod:`pybackend.testing.engine`.
"""

from __future__ import annotations

import json
import sys
import threading
import types
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..stub import loader
from ..stub.failures import finalize_failed_text
from ..stub.parameters import ParameterError
from ..stub.returns import OutputMismatch, OutputRules
from ..stub.tracebacks import MODEL_ERRORS, format_exception
from ..utils.errors import TritonModelException
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .call_cycles import Call, queue_expires
from .config import complete
from .harness_bls import BlsServer
from .harness_bounds import (
    CALL_TIMEOUT_S,
    INITIALIZE_TIMEOUT_S,
    STOP_TIMEOUT_S,
    ExecuteStillRunningWarning,
    Worker,
    finalize_still_running_warning,
    initialize_timed_out_text,
    run_bounded,
)
from .harness_code import ModelCode, Running, stub_argv
from .harness_errors import InferError, NoResponse, decoupled_infer_refused
from .harness_execute import Executor, Inputs
from .harness_instances import Instances, instance_kind
from .harness_responses import Requested, response_outputs
from .harness_streams import SenderStreams, StreamCalls
from .load_checks import refuse_like_server, run_warmup
from .model_dir import ModelOnDisk
from .model_imports import forget as forget_namespace
from .model_imports import namespace_of
from .results import Outputs
from .transport import BlsFake, LogRecord, harness_transport, install, uninstall_if_idle


class ModelHarness(ModelOnDisk):
    """One instance of the model in ``model_dir`` (``<model_dir>/<version>/model.py`` and
    ``<model_dir>/config.pbtxt``). ``config``: a dict instead of config.pbtxt (or on top of
    an absent one). ``bls``: fakes for models this one calls, by name. ``instances``: how
    many of the model's instances run (the first is this harness, the others are in
    :attr:`instances`), ``instance_process``: their PYBACKEND_INSTANCE_PROCESS instead of
    the config's (harness_instances.py). ``initialize_timeout``: seconds ``initialize`` may
    take at :meth:`start` (harness_bounds.py). ``runtime``: the directory of the
    python-based backend whose ``model.py`` runs the model (docs/python_based_backends.md)."""

    def __init__(
        self,
        model_dir: Union[str, Path],
        *,
        version: Optional[int] = None,
        config: Optional[Dict[str, Any]] = None,
        model_name: Optional[str] = None,
        instance_name: Optional[str] = None,
        bls: Optional[Mapping[str, BlsFake]] = None,
        model_file: Optional[str] = None,
        auto_complete: bool = True,
        instances: int = 1,
        instance_process: Optional[str] = None,
        initialize_timeout: float = INITIALIZE_TIMEOUT_S,
        runtime: Union[str, Path, None] = None,
    ) -> None:
        super().__init__(
            model_dir,
            version=version,
            config=config,
            model_name=model_name,
            instance_name=instance_name,
            model_file=model_file,
            auto_complete=auto_complete,
            runtime=runtime,
        )
        self.logs: List[LogRecord] = []
        self.initialize_timeout = initialize_timeout
        self.finalizing = False  # close() runs finalize: BLS is refused (spec 2.3)
        self._fakes = dict(bls or {})
        self._transport = t = harness_transport()
        self._code = ModelCode(self, t)
        self._streams = SenderStreams(t)
        self._executor = Executor(self, self._code, self._streams, t)
        self._stream_calls = StreamCalls(self, self._executor, self._streams)
        self._bls = BlsServer(self, self._executor, self._streams)
        self._instances = Instances(self, instances, instance_process)

    @property
    def instances(self) -> List["ModelHarness"]:
        """Every started instance of the model, this one first."""
        return self._instances.all

    @property
    def instance_process(self) -> str:
        """How the instances share processes: "own", "shared" or "fork" (docs/instances.md)."""
        return self._instances.mode

    @property
    def model(self) -> Any:
        """The model's TritonPythonModel instance while the harness runs (None before
        ``initialize`` ran and after close)."""
        return self._code.model

    @model.setter
    def model(self, value: Any) -> None:
        self._code.model = value

    @property
    def execute_still_running(self) -> Optional[str]:
        """The thread of an ``execute`` a call's timeout left running, while it runs (the
        harness refuses new requests meanwhile); None otherwise."""
        return self._executor.abandoned.still_running()

    @property
    def output_mismatches(self) -> List[OutputMismatch]:
        """Outputs that differed from config.pbtxt in responses the server would pass on
        (each also an OutputMismatchWarning); see pybackend.stub.returns."""
        return self._executor.output_mismatches

    @output_mismatches.setter
    def output_mismatches(self, value: List[OutputMismatch]) -> None:
        self._executor.output_mismatches = value

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
        t.cycles.add_instance(self.model_name, self.instance_name, queue_expires(self.config))
        install(t)
        try:
            refuse_like_server(self.config, self.model_name)
            self._instances.prepare()
            self._load()
        except BaseException:
            self.model = None  # initialize failed: no finalize, as in the server
            self.close()  # the process is as before: no harness left registered
            raise
        try:
            run_warmup(self)  # model_warmup, as the server runs it before the model is ready
            self._instances.start_others()
        except BaseException:
            self.close()
            raise
        return self

    def _load(self) -> None:
        with stub_argv():
            # On the instance's thread, as all of its code (a stub's: on its main thread).
            module = self._code.run_marked(self._import)
            try:  # the stub's loader, so its checks and texts are the ones a model meets
                cls = loader.model_class(module)
                if self.auto_complete and hasattr(cls, "auto_complete_config"):
                    init = {"model_config": json.dumps(self.config), "model_name": self.model_name}
                    text = self._bounded_load(
                        lambda: self._code.run_marked(lambda: loader.auto_complete(module, init)),
                        "auto_complete_config",
                    )
                    completed = json.loads(text)
                    self.config = complete(completed, self.model_name)
                else:  # the server completes every config (a batcher's preferred sizes)
                    self.config = complete(self.config, self.model_name)
                # The stub's rules for what execute returns (stub/returns.py).
                self._executor.output_rules = OutputRules(self.config, self.instance_name)
            except (loader.LoadError, ParameterError) as e:
                raise TritonModelException(str(e)) from None
            self.model = self._code.run_marked(cls)
            if hasattr(self.model, "initialize"):
                args = self.initialize_args()
                self._bounded_load(lambda: self._code.call("initialize", args), "initialize")
            self._executor.watch_sequences(
                lambda text: self.logs.append(LogRecord(2, __file__, 0, text))
            )

    def _bounded_load(self, fn: Callable[[], Any], phase: str) -> Any:
        """``fn()``, the model's ``phase`` of the load (run on the instance's thread), within
        :attr:`initialize_timeout`, as a stub process's load is bounded; past it the load
        fails, and ``fn`` is left on its daemon thread, as Python cannot stop a thread."""

        def timed_out(worker: Worker[Any]) -> Exception:
            where = self._code.thread_name(worker.thread.name)
            what = (
                f"it runs on in daemon thread '{where}', as Python cannot stop a thread, and "
                "the harness is closed"
            )
            text = initialize_timed_out_text(
                self.model_name, self.instance_name, self.initialize_timeout, what, phase
            )
            return TritonModelException(text)

        name = f"harness-{phase}-{self.model_name}"
        return run_bounded(fn, self.initialize_timeout, name, timed_out, self.config)

    def _import(self) -> types.ModuleType:
        if not self.model_file.is_file():
            raise TritonModelException(loader.missing_file_text(self.model_file))
        runtime = self.runtime_dir  # a python-based backend's: only its directory, as a stub
        paths = [self.version_dir, self.model_dir] if runtime is None else [runtime]
        for path in map(str, paths):
            if path not in sys.path:
                sys.path.append(path)
        # Packages of our own per model and version, so two models' "1/model.py" (and their
        # "helpers.py" imported by plain name) do not share a module, and relative imports
        # of the model's siblings work as in the stub (model_imports.py).
        return namespace_of(self.version_dir, runtime).import_model(self.model_file.stem)

    def close(self) -> None:
        """``finalize`` (the other instances' first), then forget the model."""
        self._instances.close_others()
        self._executor.stop_sequences()
        self.finalizing = True  # BLS is refused from here on, as in the stub
        if self.model is not None and hasattr(self.model, "finalize"):
            self._finalize()
        self.model = None
        self._code.stop_loop()
        if not self._instances.is_other:  # an other's thread is stopped by the first
            self._code.stop_thread()
        t = self._transport
        with t.lock:
            if self in t.harnesses:
                t.harnesses.remove(self)
                t.cycles.remove_instance(self.model_name, self.instance_name)
            for name in self._fakes:
                t.fakes.pop(name, None)
            for token in [k for k, s in t.by_token.items() if s is self._streams]:
                del t.by_token[token]
        t.forget_families_of(self)
        uninstall_if_idle(t)

    def _finalize(self) -> None:
        # Bounded as a StubModel bounds it (STOP_TIMEOUT_S), so closing never hangs: a
        # finalize still running then is left on its daemon thread, with a warning.
        # An ``async def finalize`` is not awaited, as in a stub (and the original's).
        worker = Worker(
            lambda: self._code.call("finalize", settle=False), f"harness-finalize-{self.model_name}"
        )
        if not worker.run(STOP_TIMEOUT_S):
            where = self._code.thread_name(worker.thread.name)
            text = finalize_still_running_warning(self.model_name, self.instance_name, where)
            warnings.warn(text, ExecuteStillRunningWarning, stacklevel=3)
            return
        try:
            worker.result()
        except MODEL_ERRORS as e:  # logged, and the unload goes on, as in the stub
            text = finalize_failed_text(self.instance_name, format_exception(e))
            self.logs.append(LogRecord(0, __file__, 0, text))

    def initialize_args(self) -> Dict[str, str]:
        """The ``args`` of ``initialize`` (spec: 7 string keys)."""
        return {
            "model_config": json.dumps(self.config),
            "model_instance_kind": instance_kind(self.config, self.instance_name),
            "model_instance_name": self.instance_name,
            "model_instance_device_id": "0",
            "model_repository": str(self.model_dir),
            "model_version": str(self.version),
            "model_name": self.model_name,
        }

    # ------------------------------------------------------------------ calls

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
        return self._executor.request(
            inputs,
            requested_outputs=requested_outputs,
            request_id=request_id,
            correlation_id=correlation_id,
            parameters=parameters,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
            sequence_end=sequence_end,
            queued_ns=queued_ns,
        )

    def execute(
        self,
        requests: Sequence[Union[Inputs, InferenceRequest]],
        timeout: float = CALL_TIMEOUT_S,
    ) -> List[Any]:
        """One ``execute`` batch. Returns, per request, its ``InferenceResponse``: an error
        response when ``execute`` raised or returned something the backend refuses (the
        backend's texts), or ``None`` when it answers through its response sender
        (decoupled mode; see :meth:`stream`). An execute that does not return within
        ``timeout`` seconds raises NoResponse (docs/testing.md, "Timeouts")."""
        reqs = [r if isinstance(r, InferenceRequest) else self.request(r) for r in requests]
        return self._executor.execute_bounded(reqs, timeout, "execute")

    def stream(
        self, inputs: Union[Inputs, InferenceRequest], timeout: float = CALL_TIMEOUT_S
    ) -> List[InferenceResponse]:
        """A decoupled model's responses to one request, until the response sender's FINAL
        (waited for at most ``timeout`` seconds from the call, execute included: senders may
        answer from threads)."""
        return self._stream_calls.stream(inputs, timeout)

    def infer_stream(
        self,
        inputs: Inputs,
        timeout: float = CALL_TIMEOUT_S,
        cancel_after: Optional[int] = None,
        on_response: Optional[Callable[[Outputs], None]] = None,
        cancel_event: Optional[threading.Event] = None,
        **kwargs: Any,
    ) -> List[Outputs]:
        """A decoupled model's responses to one request, as outputs by name (an error
        response raises :class:`InferError`); the call of every engine
        (:class:`pybackend.testing.engine.Engine`).

        ``cancel_after=n``: the client cancels once ``n`` responses came (``0``: at once);
        from then on ``is_cancelled()`` is true for the request and its sender. The model
        must still end the stream with FINAL; a CANCELLED error response ends it quietly.
        ``on_response``: called with each response's outputs as the model sends it (also
        from the model's threads), before this returns them all. ``cancel_event``: once
        set (by another thread), the client cancels, as with ``cancel_after``.
        ``kwargs``: as :meth:`request` (request id, sequence id and flags, ...)."""
        return self._stream_calls.infer_stream(
            inputs, timeout, cancel_after, on_response, cancel_event, **kwargs
        )

    def infer_batch(
        self,
        batch: Sequence[Inputs],
        *,
        requested_outputs: Sequence[str] = (),
        options: Optional[Sequence[Mapping[str, Any]]] = None,
        timeout: float = CALL_TIMEOUT_S,
    ) -> List[Union[Outputs, InferError]]:
        """Several requests in one ``execute``, as the dynamic batcher hands them over.
        ``options``: per request, ``requested_outputs``, ``request_id``, ``parameters`` and
        ``queued_ns`` as :meth:`request` takes them. Per request: its outputs, or its error as an
        :class:`InferError` (returned, not raised: one request's error leaves the others'
        answers; an execute that outlives ``timeout`` gives each its NoResponse). A request
        the server would refuse gets that error and stays out of the batch, as in the
        server (a decoupled model's, every one: :meth:`infer`)."""
        if self.decoupled:
            return [decoupled_infer_refused(self.model_name) for _ in batch]
        results: List[Any] = [None] * len(batch)
        admitted: List[Tuple[int, InferenceRequest]] = []
        for i, inputs in enumerate(batch):
            opts = {"requested_outputs": requested_outputs, **(options[i] if options else {})}
            try:
                admitted.append((i, self.request(inputs, **opts)))
            except InferError as e:
                results[i] = e
        if admitted:
            reqs = [req for _, req in admitted]
            try:
                responses = self._executor.execute_bounded(reqs, timeout, "infer_batch")
            except NoResponse as e:
                for i, _ in admitted:
                    results[i] = e
                return results
            for (i, req), resp in zip(admitted, responses):
                try:
                    results[i] = response_outputs(
                        None if resp is None else self._checked(resp, req), req
                    )
                except InferError as e:
                    results[i] = e
        return results

    def infer(self, inputs: Inputs, *, timeout: float = CALL_TIMEOUT_S, **kwargs: Any) -> Outputs:
        """One request; its outputs by name (only ``requested_outputs`` when given). An
        error response raises :class:`InferError` with its message; an execute that does
        not return within ``timeout`` seconds, NoResponse. A decoupled model's is refused,
        as tritonserver refuses it: use :meth:`infer_stream`."""
        if self.decoupled:
            raise decoupled_infer_refused(self.model_name)
        req = self.request(inputs, **kwargs)
        (resp,) = self._executor.execute_bounded([req], timeout, "infer")
        return response_outputs(None if resp is None else self._checked(resp, req), req)

    # ------------------------------------------------------------------ parts' services

    def _checked(self, resp: InferenceResponse, req: Requested) -> InferenceResponse:
        """``resp`` with the outputs Triton passes on (those requested), as the server's
        stub checks them (stub/returns.py): under PYBACKEND_STRICT_OUTPUTS a mismatch turns
        it into the error response; otherwise it passes, and each mismatch is reported in
        :attr:`output_mismatches` and as an OutputMismatchWarning."""
        return self._executor.checked(resp, req)

    def _running(self) -> Running:
        """Marks this harness's model code as running on the calling thread."""
        return self._code.running()

    def _serve_bls(
        self, request: InferenceRequest, decoupled_call: bool, call: Optional[Call]
    ) -> Any:
        """A BLS call from another model in this process (the transport routes it here;
        ``call``: the call as the transport's cycle registry knows it)."""
        return self._bls.serve(request, decoupled_call, call)


def forget_imports(version_dir: Union[str, Path]) -> None:
    """Drop what the harness imported from ``version_dir`` (its model.py and siblings), so
    that the next harness of that model imports the files as they are now (a reload)."""
    forget_namespace(Path(version_dir).resolve())
