"""Run a ``model.py`` in a real stub process (``python -m pybackend.stub``, the process the
backend starts per instance), driven from this process by :class:`StubDriver` instead of
tritonserver: the model's inputs and outputs cross the real channels and shared memory, it
runs in a process of its own (its imports, globals, threads and crashes stay there), and no
server is needed.

    with StubModel("model_repository/add_sub") as model:
        out = model.infer({"INPUT0": a, "INPUT1": b})

The calls are :class:`ModelHarness`'s and :class:`ServerModel`'s (``infer``, ``infer_stream``),
so the pytest plugin runs one test in any of the three modes. This module starts and stops
the stub process; the requests to it are :class:`StubRequests`' (stub_requests.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ..execution_env import EnvError, package_parent, prepare
from ..ipc.channel import ChannelClosed
from ..stub.loader import missing_file_text
from ..stub.returns import OutputRules
from ..utils.errors import TritonModelException
from .config import complete
from .harness_bounds import (
    INITIALIZE_TIMEOUT_S,
    STOP_TIMEOUT_S,
    debugging,
    initialize_timed_out_text,
)
from .harness_instances import instance_kind
from .load_checks import refuse_like_server, run_warmup
from .metric_store import MetricStore
from .stub_driver import StubDriver
from .stub_instances import StubInstances
from .stub_process import Watchdog, attach_stub, kill_stub, shutdown_stub, spawn_stub
from .stub_requests import StubRequests
from .stub_services import StubServices, register, unregister
from .transport import BlsFake, LogRecord, MetricRecord


class StubModel(StubRequests):
    """One instance of the model in ``model_dir`` in a stub process of its own. ``bls``:
    fakes for the models it calls (other StubModels started in this process answer calls
    to their names); ``env``: extra environment of the stub; ``python``: the interpreter
    that runs the stub (by default the model's ``EXECUTION_ENV_PATH`` environment's, as
    the backend starts it, else the one running the tests); ``debug``: a PYBACKEND_DEBUG
    mode for the stub (``"pdb"``: breakpoint() in model.py opens pdb on the terminal of
    ``pytest -s``; ``"debugpy:5678"``: attach an IDE); ``execute_timeout``: seconds an
    execute may take before the stub is killed and the request fails;
    ``initialize_timeout``: seconds the stub may take to answer INIT (model.py's import and
    ``initialize``, or ``auto_complete_config``) before it is killed and the load fails."""

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
        env: Optional[Mapping[str, str]] = None,
        python: Optional[str] = None,
        debug: str = "",
        execute_timeout: Optional[float] = None,
        metric_store: Optional[MetricStore] = None,
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
            debug=debug,
            runtime=runtime,
        )
        self.output = []
        self._closed_logs: List[Any] = []  # the logs of the stub that was closed last
        self._fakes = dict(bls or {})
        self._env = dict(env or {})
        self._python = python or sys.executable
        self._python_given = python is not None
        self._unset: List[str] = []
        self.execute_timeout = execute_timeout
        self.initialize_timeout = initialize_timeout
        self._driver = None
        self._services: Optional[StubServices] = None
        #: Where the model's custom metrics are kept (``metric_store=``: one shared with
        #: other instances of the model, as tritonserver's registry is).
        self.metric_store = metric_store if metric_store is not None else MetricStore()
        self._instances = StubInstances(self, instances, instance_process)

    @property
    def instances(self) -> List["StubModel"]:
        """Every started instance of the model, this one first (``instances=N``; under
        ``shared`` their :attr:`pid` is the one process they share)."""
        return self._instances.all

    @property
    def instance_process(self) -> str:
        """How the instances share processes: "own", "shared" or "fork" (docs/instances.md)."""
        return self._instances.mode

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
        self._instances.prepare()
        try:
            driver = self._spawn_instance()
        except BaseException:
            self._instances.close_host()
            raise
        self._services = StubServices(
            driver, self._fakes, self.instance_name, self.metric_store, self.model_name
        )
        try:
            reply = self._init(driver, "initialize", decoupled=self.decoupled, debug=self._debug)
        except BaseException:
            shutdown_stub(driver)
            self._instances.close_host()
            raise
        if not reply["ok"]:
            shutdown_stub(driver)
            self._instances.close_host()
            raise TritonModelException(reply["error"])
        driver.on_send = self._routes.on_send
        self._driver = driver
        register(self)
        try:
            run_warmup(self)  # model_warmup, as the server runs it before the model is ready
            self._instances.start_others()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """``finalize``, then wait for the stub to exit (:attr:`logs` and :attr:`output` keep
        what it logged and printed, finalize's lines included). The other instances close
        first, the process they share last."""
        self._instances.close_others()
        unregister(self)
        driver, self._driver = self._driver, None
        if driver is not None:
            # An execute a caller's timeout left running holds the sync channel until its
            # RESULT: waited for as long as a finalize, then the stub is killed (it ends).
            if not self.abandoned.returned(STOP_TIMEOUT_S):
                kill_stub(driver)
                self.abandoned.returned(STOP_TIMEOUT_S)
            shutdown_stub(driver)
            self._closed_logs = list(driver.logs)
        if self._services is not None:
            self._services.forget_families()
        self._instances.close_host()

    def _run_auto_complete(self) -> Dict[str, Any]:
        driver = self._spawn()
        try:
            reply = self._init(driver, "auto_complete")
        finally:
            shutdown_stub(driver)
        if not reply["ok"]:
            raise TritonModelException(reply["error"])
        return reply

    def _init(self, driver: StubDriver, phase: str, **kwargs: Any) -> Dict[str, Any]:
        """The stub's answer to INIT of ``phase``, within :attr:`initialize_timeout` (as the
        backend bounds it by initialize-timeout-seconds, where set): past it the stub is
        killed."""
        debug = debugging(self._debug, self.config)
        watchdog = None if debug else Watchdog(self.initialize_timeout, driver)
        try:
            return driver.init(
                self.model_file, self.config, phase=phase, **kwargs, **self._init_extra()
            )
        except (ChannelClosed, OSError, AssertionError):
            if watchdog is None or not watchdog.fired:
                raise
            what = "auto_complete_config" if phase == "auto_complete" else phase
            text = initialize_timed_out_text(
                self.model_name,
                self.instance_name,
                self.initialize_timeout,
                "the stub was killed",
                what,
            )
            raise TritonModelException(text) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()

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
        limit = self._hello_limit()
        try:
            return spawn_stub(
                self.instance_name, self._env, self._python, self._unset, self.output, limit
            )
        except TimeoutError:
            raise self._no_hello(limit) from None

    def _spawn_instance(self) -> StubDriver:
        """The instance's stub: a process of its own, or the host's (shared, fork)."""
        host = self._instances.host
        if host is None:
            return self._spawn()
        init = {"model_file": str(self.model_file)}
        limit = self._hello_limit()
        try:
            return attach_stub(host, self.instance_name, {**init, **self._init_extra()}, limit)
        except TimeoutError:
            raise self._no_hello(limit) from None

    def _hello_limit(self) -> Optional[float]:
        # The stub's start is bounded as the backend bounds it (stub-timeout-seconds covers
        # its HELLO), by initialize_timeout, though never by less than STOP_TIMEOUT_S:
        # a short limit meant for initialize must not fail a slow interpreter start.
        if debugging(self._debug, self.config):
            return None
        return max(self.initialize_timeout, STOP_TIMEOUT_S)

    def _no_hello(self, limit: Optional[float]) -> TritonModelException:
        what = f"the stub was killed: no HELLO (its interpreter's start) in {limit or 0:g} s"
        return TritonModelException(
            initialize_timed_out_text(
                self.model_name, self.instance_name, self.initialize_timeout, what, "the start"
            )
        )

    def _init_extra(self) -> Dict[str, Any]:
        return {
            "instance_kind": instance_kind(self.config, self.instance_name),
            "model_name": self.model_name,
            "model_version": str(self.version),
            "model_repository": str(self.model_dir),
            "version_dir": str(self.version_dir),  # pb_utils.get_model_dir()
            # A python-based backend's directory, as the backend hands it (a stub imports
            # its model.py as "model", with that directory on sys.path).
            "runtime_modeldir": str(self.runtime_dir or "DEFAULT"),
            "instance_name": self.instance_name,
        }
