"""Run a ``model.py`` in a real stub process (``python -m pybackend.stub``, the process the
backend starts per instance), driven from this process by :class:`StubDriver` instead of
tritonserver: the model's inputs and outputs cross the real channels and shared memory, it
runs in a process of its own (its imports, globals, threads and crashes stay there), and no
server is needed.

    with StubModel("model_repository/add_sub") as model:
        out = model.infer({"INPUT0": a, "INPUT1": b})

The calls are :class:`ModelHarness`'s and :class:`ServerModel`'s (``infer``, ``infer_stream``),
so the pytest plugin runs one test in any of the three modes.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..execution_env import EnvError, package_parent, prepare
from ..ipc.channel import ChannelClosed
from ..stub.loader import missing_file_text
from ..stub.returns import OutputMismatch, OutputRules
from ..utils.errors import ErrorCode, TritonModelException
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as RELEASE_RESCHEDULE
from ..utils.tensor import Tensor
from .cancel_watch import CancelWatch
from .config import complete
from .harness_errors import InferError
from .inputs import check_inputs, parameters_json
from .load_checks import refuse_like_server, run_warmup
from .metric_store import MetricStore
from .model_dir import ModelOnDisk
from .outputs import array_mismatches, report_mismatches
from .outputs import requested_outputs as requested_outputs_of
from .results import Outputs, parameters_from_json
from .sequence import request_fields
from .statistics import ExecuteTimes
from .stub_driver import StubDriver
from .stub_services import StubServices, register, unregister
from .transport import FINAL, BlsFake, LogRecord, MetricRecord

Inputs = Mapping[str, Any]


class StubModel(ModelOnDisk):
    """One instance of the model in ``model_dir`` in a stub process of its own. ``bls``:
    fakes for the models it calls (other StubModels started in this process answer calls
    to their names); ``env``: extra environment of the stub; ``python``: the interpreter
    that runs the stub (by default the model's ``EXECUTION_ENV_PATH`` environment's, as
    the backend starts it, else the one running the tests); ``debug``: a PYBACKEND_DEBUG
    mode for the stub (``"pdb"``: breakpoint() in model.py opens pdb on the terminal of
    ``pytest -s``; ``"debugpy:5678"``: attach an IDE); ``execute_timeout``: seconds an
    execute may take before the stub is killed and the request fails."""

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
        env: Optional[Mapping[str, str]] = None,
        python: Optional[str] = None,
        debug: str = "",
        execute_timeout: Optional[float] = None,
        metric_store: Optional[MetricStore] = None,
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
        #: What the stub wrote to its stdout and stderr, line by line.
        self.output: List[str] = []
        self._closed_logs: List[Any] = []  # the logs of the stub that was closed last
        self._fakes = dict(bls or {})
        self._env = dict(env or {})
        self._python = python or sys.executable
        self._python_given = python is not None
        self._unset: List[str] = []
        self._debug = debug
        #: Seconds an execute may take before the stub is killed (None: no limit, as the
        #: backend's default execute-timeout-seconds=0).
        self.execute_timeout = execute_timeout
        self._driver: Optional[StubDriver] = None
        self._services: Optional[StubServices] = None
        #: Where the model's custom metrics are kept (``metric_store=``: one shared with
        #: other instances of the model, as tritonserver's registry is).
        self.metric_store = metric_store if metric_store is not None else MetricStore()
        self._lock = threading.Lock()  # one execute at a time, as the backend sends them
        self._tokens = itertools.count(1)
        self._batches = itertools.count(1)
        self._cancel_after: Dict[int, int] = {}  # token -> responses before cancelling
        self._sent_count: Dict[int, int] = {}
        # token -> where a live stream's responses go (BLS calls to this model)
        self._live: Dict[int, Callable[[Optional[Dict[str, Any]], bool], None]] = {}
        #: Outputs that differed from config.pbtxt in responses the server would pass on
        #: (each also an OutputMismatchWarning); see pybackend.stub.returns.
        self.output_mismatches: List[OutputMismatch] = []
        self._output_rules: Optional[OutputRules] = None

    def __enter__(self) -> "StubModel":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> Optional[int]:
        return self._driver.proc.pid if self._driver is not None else None

    @property
    def alive(self) -> bool:
        """Whether the instance's stub process runs (False once it exited or was killed)."""
        return self._driver is not None and self._driver.proc.poll() is None

    @property
    def logs(self) -> List[LogRecord]:
        """What ``pb_utils.Logger`` (and the stub itself) logged, in order (after close: what
        the last stub logged)."""
        logs = self._closed_logs if self._driver is None else list(self._driver.logs)
        return [LogRecord(lv, f, line, m) for lv, line, f, m in logs]

    @property
    def metrics(self) -> Dict[int, MetricRecord]:
        """The model's custom metrics (one record per series), by id."""
        return self.metric_store.snapshot()[1]

    @property
    def metric_families(self) -> Dict[int, Tuple[str, str, int]]:
        """The model's live metric families, by id: (name, description, kind)."""
        return self.metric_store.snapshot()[0]

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "StubModel":
        """Start a stub for ``auto_complete_config`` (as the server does at load), then the
        instance's stub, which runs ``initialize``."""
        if not self.model_file.is_file():
            raise TritonModelException(missing_file_text(self.model_file))
        refuse_like_server(self.config, self.model_name)
        self._use_execution_env()
        if self.auto_complete:
            reply = self._run_auto_complete()
            if reply.get("model_config"):
                self.config = complete(json.loads(reply["model_config"]), self.model_name)
        self._output_rules = OutputRules(self.config, self.instance_name)
        driver = self._spawn()
        self._services = StubServices(driver, self._fakes, self.instance_name, self.metric_store)
        reply = driver.init(
            self.model_file,
            self.config,
            phase="initialize",
            decoupled=self.decoupled,
            debug=self._debug,
            **self._init_extra(),
        )
        if not reply["ok"]:
            self._shutdown(driver)
            raise TritonModelException(reply["error"])
        driver.on_send = self._on_send
        self._driver = driver
        register(self)
        try:
            run_warmup(self)  # model_warmup, as the server runs it before the model is ready
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """``finalize``, then wait for the stub to exit (:attr:`logs` and :attr:`output` keep
        what it logged and printed, finalize's lines included)."""
        unregister(self)
        driver, self._driver = self._driver, None
        if driver is not None:
            self._shutdown(driver)
            self._closed_logs = list(driver.logs)
        if self._services is not None:
            self._services.forget_families()

    def _run_auto_complete(self) -> Dict[str, Any]:
        driver = self._spawn()
        try:
            reply = driver.init(
                self.model_file, self.config, phase="auto_complete", **self._init_extra()
            )
        finally:
            self._shutdown(driver)
        if not reply["ok"]:
            raise TritonModelException(reply["error"])
        return reply

    def _use_execution_env(self) -> None:
        """The model's EXECUTION_ENV_PATH, resolved as the backend resolves it (an archive
        unpacked into the cache): its interpreter runs the stubs, which see only pybackend
        of this environment on their PYTHONPATH, and the variables the backend sets."""
        params = self.config.get("parameters") or {}
        value = (params.get("EXECUTION_ENV_PATH") or {}).get("string_value")
        if not value or self._python_given:
            return
        value = value.replace("$$TRITON_MODEL_DIRECTORY", str(self.model_dir))
        try:
            env = prepare(value, str(self.model_dir), package_parent())
        except EnvError as e:
            raise TritonModelException(str(e)) from None
        self._python = env.python
        self._env = {**env.env, "PYTHONPATH": env.pythonpath, **self._env}
        self._unset = list(env.unset)

    def _spawn(self) -> StubDriver:
        driver = StubDriver(
            self.instance_name,
            env=self._env,
            python=self._python,
            cwd=Path(os.getcwd()),
            unset=self._unset,
        )
        for stream in (driver.proc.stdout, driver.proc.stderr):
            # Read as it comes: a stub that prints more than a pipe holds must not block.
            thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
            thread.start()
            driver.pipe_readers.append(thread)
        try:
            driver.hello()
        except BaseException:
            driver.close()
            raise
        return driver

    def _init_extra(self) -> Dict[str, Any]:
        return {
            "model_name": self.model_name,
            "model_version": str(self.version),
            "model_repository": str(self.model_dir),
            "instance_name": self.instance_name,
        }

    def _drain(self, stream: Optional[IO[bytes]]) -> None:
        if stream is None:
            return
        try:
            for line in iter(stream.readline, b""):
                self.output.append(line.decode(errors="replace").rstrip("\n"))
        except (OSError, ValueError):
            pass  # closed by StubDriver.close

    def _shutdown(self, driver: StubDriver) -> None:
        # A stub still busy in execute (or hung in finalize) never answers FINALIZE: it is
        # killed after STOP_TIMEOUT_S so that closing the model cannot hang the test run.
        timer = threading.Timer(STOP_TIMEOUT_S, _kill, args=(driver,))
        timer.daemon = True
        timer.start()
        try:
            if driver.proc.poll() is None:
                driver.finalize()
        except (ChannelClosed, OSError, TimeoutError, AssertionError):
            pass  # it died or hung in finalize: close() below ends it either way
        finally:
            timer.cancel()
            driver.close()

    # ------------------------------------------------------------------ requests

    def infer(
        self,
        inputs: Inputs,
        *,
        requested_outputs: Sequence[str] = (),
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        parameters: Optional[Mapping[str, Any]] = None,
        timeout: float = 30.0,
        sequence_id: Union[int, str] = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
    ) -> Outputs:
        """One request; its outputs by name. An error response raises :class:`InferError`.
        The sequence arguments are tritonclient's (see :meth:`ModelHarness.request`)."""
        responses = self._request(
            inputs,
            requested_outputs,
            request_id,
            request_fields(correlation_id, sequence_id, sequence_start, sequence_end),
            parameters,
            timeout,
        )
        if len(responses) != 1:
            raise InferError(f"the model sent {len(responses)} responses, not 1")
        return responses[0]

    def infer_stream(
        self,
        inputs: Inputs,
        timeout: float = 30.0,
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
    ) -> List[Outputs]:
        driver = self._started()
        arrays = {k: _array(v) for k, v in inputs.items()}
        requested = requested_outputs_of(self.config, requested, self.model_name)
        self.check_request(arrays, request_id)
        correlation_id, flags = sequence
        arrays.update(self.admit_sequence(correlation_id, flags))
        token = next(self._tokens)
        if cancel_after is not None:
            self._cancel_after[token] = cancel_after
            if cancel_after <= 0:
                self.cancel(token)
        live = _Live(requested, on_response) if on_response is not None else None
        if live is not None:
            self._live[token] = live.emit
        watch = CancelWatch(cancel_event, lambda: self.cancel(token))
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
                )
                if live is not None:
                    sent = live.wait(sent, driver, timeout, self)
        finally:
            self._live.pop(token, None)
            self._cancel_after.pop(token, None)
            self._sent_count.pop(token, None)
            driver.cancelled_tokens.discard(token)
        return _stream_outputs(sent, requested, cancel_after is not None or watch.cancelled)

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
    ) -> int:
        """Start a request whose responses go to ``emit(response, final)`` as the stub
        sends them (a BLS call's stream); returns its token (for :meth:`cancel`)."""
        driver = self._started()
        requested = requested_outputs_of(self.config, requested, self.model_name)
        token = next(self._tokens)
        self._live[token] = emit

        def run() -> None:
            try:
                sent = self._execute(
                    driver, token, arrays, requested, request_id, correlation_id, parameters,
                    0.0, live=True,
                )  # fmt: skip
            except InferError as e:
                sent = [{"error": (e.code, e.message), "outputs": {}}]
            if sent and self._live.pop(token, None) is not None:
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
            (item,) = self._run_batch(driver, [arrays], [requested], [kwargs], [queued])
            if isinstance(item, InferError):
                raise item
            if item.get("release_flags") != RELEASE_RESCHEDULE:
                break
            # Released with RESCHEDULE: the same request (token, inputs, id) comes back in a
            # later execute, as the server's sequence batcher sends it again.
        if item.get("none"):
            # The sender answers: live, its sends went (and go) to emit already.
            sent = [] if live else self._sent(driver, token, timeout)
        else:
            sent = [item]
        return [self._checked(r) for r in sent]

    def _run_batch(
        self,
        driver: StubDriver,
        batch: List[Dict[str, np.ndarray]],
        requested: Sequence[Sequence[str]],
        kwargs: List[Dict[str, Any]],
        queued: Sequence[int],
    ) -> List[Any]:
        """One EXECUTE of ``batch`` (``requested``: each request's outputs; ``queued``: when
        each arrived, for :attr:`statistics`): each request's item (a response, or ``none``
        where its sender answers), or the InferError every request gets when the batch
        failed or the stub died or timed out in it."""
        with self._lock:
            times = ExecuteTimes()
            try:
                items = self._run_batch_locked(driver, batch, requested, kwargs, times)
            except InferError:
                self._record(batch, queued, [None] * len(batch), times.finish())
                raise
            self._record(batch, queued, items, times.finish())
        return items

    def _run_batch_locked(
        self,
        driver: StubDriver,
        batch: List[Dict[str, np.ndarray]],
        requested: Sequence[Sequence[str]],
        kwargs: List[Dict[str, Any]],
        times: ExecuteTimes,
    ) -> List[Any]:
        watchdog = self._watchdog(driver)
        try:
            result = driver.execute(
                batch,
                batch_id=next(self._batches),
                requested=[list(r) for r in requested],
                request_kwargs=[dict(k) for k in kwargs],
                times=times,
            )
        except (ChannelClosed, OSError, AssertionError) as e:
            if watchdog is not None and watchdog.fired:
                raise InferError(self._timed_out(), ErrorCode.INTERNAL) from None
            raise InferError(self._died(e), ErrorCode.INTERNAL) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
        if "error" in result:
            code, message = result["error"]
            return [InferError(message, code) for _ in batch]
        return list(result["items"])

    def _record(
        self,
        batch: List[Dict[str, np.ndarray]],
        queued: Sequence[int],
        items: Sequence[Any],
        times: ExecuteTimes,
    ) -> None:
        """The execute in :attr:`statistics` (an item that is an error, or none where the
        batch failed, fails its request; one released to come back is left out)."""
        outcomes = [
            (
                when,
                self.batch_size(a.shape for a in arrays.values()),
                isinstance(item, dict) and not item.get("error"),
            )
            for arrays, when, item in zip(batch, queued, items)
            if not (isinstance(item, dict) and item.get("release_flags") == RELEASE_RESCHEDULE)
        ]
        self.statistics.record(times, outcomes)

    def infer_batch(
        self,
        batch: Sequence[Inputs],
        *,
        requested_outputs: Sequence[str] = (),
        options: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> List[Union[Outputs, InferError]]:
        """As :meth:`ModelHarness.infer_batch`: one EXECUTE for the batch."""
        if self.decoupled:
            raise TypeError("infer_batch is for models that answer with one response")
        driver = self._started()
        results: List[Any] = [None] * len(batch)
        admitted: List[Tuple[int, Dict[str, np.ndarray], List[str], Dict[str, Any], int]] = []
        for i, inputs in enumerate(batch):
            opts = dict(options[i]) if options is not None else {}
            request_id = str(opts.get("request_id", ""))
            arrays = {k: _array(v) for k, v in inputs.items()}
            try:
                wanted = opts.get("requested_outputs", requested_outputs)
                requested = requested_outputs_of(self.config, wanted, self.model_name)
                self.check_request(arrays, request_id)
            except InferError as e:
                results[i] = e
                continue
            kwargs: Dict[str, Any] = {
                "token": next(self._tokens),
                "request_id": request_id,
                "parameters": parameters_json(opts.get("parameters")),
            }
            queued = opts.get("queued_ns")
            admitted.append((i, arrays, requested, kwargs, queued or time.monotonic_ns()))
        if admitted:
            _, arrays_of, requested_of, kwargs_of, queued_of = (list(c) for c in zip(*admitted))
            items = self._run_batch(driver, arrays_of, requested_of, kwargs_of, queued_of)
            for (i, _, requested, kwargs, _), item in zip(admitted, items):
                if isinstance(item, InferError):
                    results[i] = item
                    continue
                try:
                    if item.get("none"):  # its response sender answered (once, with FINAL)
                        sent = self._sent(driver, kwargs["token"], 30.0)
                        if len(sent) != 1:
                            raise InferError(f"the model sent {len(sent)} responses, not 1")
                        item = sent[0]
                    results[i] = _outputs(self._checked(item), requested)
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

    def _on_send(self, token: int, flags: int, resp: Optional[Dict[str, Any]]) -> bool:
        """Each SEND, on the driver's reader thread; True when it was taken here."""
        emit = self._live.get(token)
        if emit is not None:
            final = bool(flags & FINAL)
            if final:
                self._live.pop(token, None)
            emit(None if resp is None else self._checked(resp), final)
        if resp is not None and self._driver is not None:
            count = self._sent_count[token] = self._sent_count.get(token, 0) + 1
            if count == self._cancel_after.get(token):
                self.cancel(token)
        return emit is not None

    def _sent(self, driver: StubDriver, token: int, timeout: float) -> List[Dict[str, Any]]:
        """The responses the request's sender sent, once FINAL came."""

        def final() -> bool:
            return any(t == token and f & FINAL for t, f, _ in driver.sends)

        with driver.cond:
            done = driver.cond.wait_for(lambda: final() or driver.async_closed, timeout)
            got_final = final()
            mine = [r for t, _, r in driver.sends if t == token and r is not None]
            driver.sends[:] = [s for s in driver.sends if s[0] != token]
        if not done:
            raise InferError(
                f"no FINAL from the response sender of '{self.model_name}' within "
                f"{timeout:g} s ({len(mine)} responses so far)"
            )
        if not got_final:
            raise InferError(self._died(None), ErrorCode.INTERNAL)
        return mine

    def _watchdog(self, driver: StubDriver) -> Optional["_Watchdog"]:
        if self.execute_timeout is None:
            return None
        return _Watchdog(self.execute_timeout, driver)

    def _timed_out(self) -> str:
        return (
            f"execute of model '{self.model_name}' (instance '{self.instance_name}') took "
            f"longer than execute_timeout={self.execute_timeout:g} s: the stub was killed, "
            "as the backend does with execute-timeout-seconds; start a new StubModel"
        )

    def _died(self, cause: Optional[BaseException]) -> str:
        driver = self._driver
        code: Optional[int] = None
        if driver is not None:
            try:  # the channel closes a moment before the process can be reaped
                code = driver.proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        what = f"exited with code {code}" if code is not None else f"stopped answering ({cause!r})"
        tail = "\n".join(self.output[-20:])
        return (
            f"the stub process of model '{self.model_name}' (instance '{self.instance_name}') "
            f"{what} while it ran the request; its last output:\n{tail}"
        )


STOP_TIMEOUT_S = 10.0


class _Live:
    """An ``infer_stream`` whose responses go to ``on_response`` as the stub sends them
    (taken on the driver's reader thread, like a BLS call's stream)."""

    def __init__(self, requested: Sequence[str], on_response: Callable[[Outputs], None]) -> None:
        self.requested = requested
        self.on_response = on_response
        self.sent: List[Dict[str, Any]] = []
        self.final = threading.Event()

    def emit(self, resp: Optional[Dict[str, Any]], final: bool) -> None:
        if resp is not None:
            self.sent.append(resp)
            if resp.get("error") is None:
                self.on_response(_outputs(resp, self.requested))
        if final:
            self.final.set()

    def wait(
        self, direct: List[Dict[str, Any]], driver: StubDriver, timeout: float, model: "StubModel"
    ) -> List[Dict[str, Any]]:
        """All the responses: ``direct`` (what execute answered itself: an error) after what
        was sent, or those sent until FINAL."""
        if direct:
            for resp in direct:
                if resp.get("error") is None:
                    self.on_response(_outputs(resp, self.requested))
            return self.sent + direct
        waited = 0.0
        while not self.final.wait(0.1):
            waited += 0.1
            if driver.async_closed:
                raise InferError(model._died(None), ErrorCode.INTERNAL)
            if waited >= timeout:
                raise InferError(
                    f"no FINAL from the response sender of '{model.model_name}' within "
                    f"{timeout:g} s ({len(self.sent)} responses so far)"
                )
        return self.sent


def _kill(driver: StubDriver) -> None:
    try:
        driver.proc.kill()
    except OSError:
        pass  # already gone


class _Watchdog:
    """Kills the stub when an execute outlives its limit (the wait then ends: the channel
    closes)."""

    def __init__(self, seconds: float, driver: StubDriver) -> None:
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire, args=(driver,))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, driver: StubDriver) -> None:
        self.fired = True
        _kill(driver)

    def cancel(self) -> None:
        self._timer.cancel()


def _array(value: Any) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.as_numpy()
    array = np.asarray(value)
    if array.dtype.kind == "U":  # text goes as UTF-8 BYTES, as a client sends it
        array = np.char.encode(array, "utf-8").astype(np.object_)
    return array


def _stream_outputs(
    sent: List[Dict[str, Any]], requested: Sequence[str], cancelled: bool
) -> List[Outputs]:
    out = []
    for resp in sent:
        err = resp.get("error")
        if cancelled and err is not None and err[0] == ErrorCode.CANCELLED:
            break  # the model acknowledged the client's cancel: the stream ends here
        out.append(_outputs(resp, requested))
    return out


def _outputs(resp: Dict[str, Any], requested: Sequence[str]) -> Outputs:
    if resp.get("error") is not None:
        code, message = resp["error"]
        raise InferError(message, code)
    outputs: Dict[str, np.ndarray] = resp["outputs"]
    # Only the requested outputs, as Triton returns them (all when none are named).
    return Outputs(
        ((n, a) for n, a in outputs.items() if not requested or n in requested),
        parameters_from_json(resp.get("parameters")),
    )
