"""``Triton``: PyTriton's server object, served by the real tritonserver with our backend in
attach mode: each model instance is a thread of this process (no proxy process, no second
copy). See docs/pytriton.md. User code imports it from ``pybackend.pytriton.triton``, which
also holds ``RemoteTriton`` (a subclass, so it lives in a module that imports this one)."""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..server.tritonserver import TritonServer
from ._attach import AttachListener, ModelFactory
from ._callable import CallableModel
from ._config import config_pbtxt, model_config_dict, named, warmup
from ._context import TritonContext, TritonModelConfig, inject
from ._control import ControlledServer, ServerControl
from ._gpu import check_devices
from ._security import TritonSecurityConfig
from ._sigint import sigint_calls
from ._triton_config import (
    DefaultTritonLifecyclePolicy,
    TritonConfig,
    TritonLifecyclePolicy,
    server_args,
)
from .exceptions import (
    PyTritonInvalidOperationError,
    PyTritonRuntimeError,
    PyTritonValidationError,
)
from .model_config import ModelConfig, Tensor
from .model_config.triton_model_config import ResponseCache

LOGGER = logging.getLogger("pybackend.pytriton")

MONITORING_PERIOD_S = 10.0
_STOP_WAIT_S = 120.0
REMOTE_READY_TIMEOUT_S = 120.0  # PyTriton's DEFAULT_TRITON_STARTUP_TIMEOUT_S
_MODEL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclasses.dataclass
class _Binding:
    name: str
    version: int
    infer_funcs: List[Callable[..., Any]]
    inputs: List[Tensor]
    outputs: List[Tensor]
    config: ModelConfig
    strict: bool
    model_config: TritonModelConfig
    config_json: str = ""  # the configuration as JSON (RemoteTriton loads with it)
    files: Dict[str, bytes] = dataclasses.field(default_factory=dict)  # path -> content


class Triton:
    """Starts tritonserver, serves the bound callables from this process, stops it all."""

    def __init__(
        self,
        *,
        config: Optional[TritonConfig] = None,
        workspace: Union[str, Path, None] = None,
        triton_lifecycle_policy: TritonLifecyclePolicy = DefaultTritonLifecyclePolicy,
        security_config: Optional[TritonSecurityConfig] = None,
    ) -> None:
        merged = {k: v for k, v in TritonConfig.from_env().to_dict().items() if v is not None}
        if config is not None:
            merged.update({k: v for k, v in config.to_dict().items() if v is not None})
        self._config = TritonConfig(**merged)
        own_restrictions = bool(
            self._config.http_restricted_api or self._config.grpc_restricted_protocol
        )
        if security_config is None:
            # PyTriton's default: a random token guards the control endpoints; restrictions
            # the TritonConfig sets itself are kept instead (PyTriton would overwrite them).
            security_config = TritonSecurityConfig(
                restricted_endpoints=[] if own_restrictions else None
            )
        elif security_config.active and own_restrictions:
            raise PyTritonValidationError(
                "Set the restricted endpoints either through TritonSecurityConfig or through "
                "TritonConfig's http_restricted_api/grpc_restricted_protocol, not both."
            )
        self._security_config = security_config
        #: Readiness and model loading go over HTTP, or gRPC when HTTP is off (as PyTriton).
        self._protocol = "http" if self._config.allow_http in (True, None) else "grpc"
        self._own_workspace = workspace is None
        self._workspace = Path(workspace or tempfile.mkdtemp(prefix="pytriton-")).resolve()
        self._workspace.mkdir(parents=True, exist_ok=True)
        self._repository = Path(self._config.model_repository or self._workspace / "model-store")
        self._repository.mkdir(parents=True, exist_ok=True)
        self._socket_path = str(self._workspace / "attach.sock")
        self._bindings: Dict[str, _Binding] = {}
        self._lock = threading.RLock()
        self._cv = threading.Condition(self._lock)
        self._server: Optional[TritonServer] = None
        self._control: Optional[ServerControl] = None  # set once the server runs
        self._listener: Optional[AttachListener] = None
        self._stopped = False
        self._stopping = False
        self._stopped_done = threading.Event()
        self._fatal: Optional[str] = None
        self._triton_context = TritonContext()
        self._launch_on_enter = bool(
            getattr(triton_lifecycle_policy, "launch_triton_on_startup", True)
        )
        atexit.register(self.stop)

    # ----------------------------------------------------------------- binding

    def bind(
        self,
        model_name: str,
        infer_func: Union[Callable[..., Any], Sequence[Callable[..., Any]]],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int = 1,
        config: Optional[ModelConfig] = None,
        strict: bool = False,
        trace_config: Optional[List[str]] = None,
    ) -> None:
        """Serve ``infer_func`` (a list: one instance per callable) as ``model_name``; loaded
        at once when the server runs, else by run()/serve()."""
        if not model_name:
            raise PyTritonValidationError("Model name cannot be empty")
        if not _MODEL_NAME.match(model_name):
            raise PyTritonValidationError(
                "Model name can only contain alphanumeric characters, dots, underscores and dashes"
            )
        funcs: List[Callable[..., Any]] = (
            list(infer_func) if isinstance(infer_func, (list, tuple)) else [infer_func]  # type: ignore[list-item]
        )
        if not funcs:
            raise PyTritonValidationError("At least one inference callable is required.")
        check_devices(model_name, named(inputs, "INPUT"), named(outputs, "OUTPUT"))
        binding = _Binding(
            model_name,
            int(model_version),
            funcs,
            named(inputs, "INPUT"),
            named(outputs, "OUTPUT"),
            config or ModelConfig(),
            strict,
            TritonModelConfig(model_name),
        )
        c = binding.config
        binding.model_config = TritonModelConfig(
            model_name=model_name,
            model_version=binding.version,
            max_batch_size=c.max_batch_size if c.batching else 0,
            batching=c.batching,
            batcher=c.batcher,
            inputs=binding.inputs,
            outputs=binding.outputs,
            decoupled=c.decoupled,
            response_cache=ResponseCache(enable=True) if c.response_cache else None,
        )
        as_dict = model_config_dict(
            model_name,
            binding.inputs,
            binding.outputs,
            binding.config,
            len(funcs),
            self._socket_path,
        )
        text = config_pbtxt(as_dict)
        binding.config_json = json.dumps(as_dict)
        binding.files = warmup(binding.config)[1]
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError("Cannot bind a model to a stopped Triton.")
            if model_name in self._bindings:
                raise PyTritonInvalidOperationError(f"Model {model_name} is already bound.")
            model_dir = self._repository / model_name
            model_dir.mkdir(parents=True, exist_ok=True)
            (model_dir / str(binding.version)).mkdir(exist_ok=True)
            (model_dir / "config.pbtxt").write_text(text)
            for path, content in binding.files.items():
                (model_dir / path).parent.mkdir(parents=True, exist_ok=True)
                (model_dir / path).write_bytes(content)
            self._bindings[model_name] = binding
            for fn in funcs:
                inject(self._triton_context, fn, binding.model_config)
            running = self._control is not None
        if running:
            self._load(model_name)

    def unbind(self, model_name: str) -> None:
        """Unload ``model_name`` (its in-flight requests finish first) and forget it."""
        with self._lock:
            if model_name not in self._bindings:
                raise PyTritonInvalidOperationError(f"Model {model_name} is not bound.")
            running = self._control is not None
        if running:
            self._repository_call(model_name, "unload")
        with self._lock:
            self._bindings.pop(model_name, None)
            shutil.rmtree(self._repository / model_name, ignore_errors=True)

    def _factory(self, model_name: str, instance_name: str) -> Optional[ModelFactory]:
        with self._lock:
            binding = self._bindings.get(model_name)
        if binding is None:
            return None
        index = instance_name.rsplit("_", 1)[-1]
        fn = binding.infer_funcs[int(index) % len(binding.infer_funcs) if index.isdigit() else 0]

        def make(init: Dict[str, Any], dispatcher: Any) -> CallableModel:
            return CallableModel(
                binding.model_config,
                self._triton_context,
                fn,
                binding.strict,
                dispatcher,
                self._on_unrecoverable,
                int(init.get("device_id") or 0),
                # Triton runs each warmup sample `count` times (0 means once).
                sum(max(w.count, 1) for w in binding.config.model_warmup or []),
            )

        return make

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> Triton:
        if self._launch_on_enter:  # else run()/serve() start it (TritonLifecyclePolicy)
            self.run()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def run(self) -> None:
        """Start tritonserver (if not running) and load every bound model."""
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError("This Triton was stopped; make a new one.")
            if self._control is not None:
                return
            self._listener = AttachListener(self._socket_path, self._factory)
            names = list(self._bindings)
        try:
            control = self._start()
            with self._lock:
                self._control = control
            for name in names:
                self._load(name)
        except BaseException:
            self.stop()
            raise

    def serve(self, monitoring_period_s: float = MONITORING_PERIOD_S) -> None:
        """run(), then block until Ctrl-C (or an unrecoverable error) and stop everything.
        Raises PyTritonRuntimeError when tritonserver dies meanwhile."""
        self.run()
        interrupted = []

        def on_sigint() -> None:
            # Runs in the main thread, which may be inside `with self._cv` itself: the lock
            # is an RLock, so taking it here cannot deadlock.
            with self._cv:
                interrupted.append(True)
                self._cv.notify_all()

        try:
            with sigint_calls(on_sigint), self._cv:
                while not self._stopping and not interrupted and self._alive():
                    self._cv.wait(timeout=min(monitoring_period_s, 1.0))
        except KeyboardInterrupt:  # a handler of the user's raised it
            interrupted.append(True)
        if interrupted:
            LOGGER.info("SIGINT received, exiting.")
        died = not self._stopping and not self._alive()
        detail = self._death_detail() if died else ""
        self.stop()
        if died:
            raise PyTritonRuntimeError(detail)

    def stop(self) -> bool:
        """Stop tritonserver (in-flight requests finish first), the instance threads and
        the listener, and remove the workspace. False when already stopped."""
        with self._lock:
            if self._stopped:
                stopping_elsewhere = True
            else:
                stopping_elsewhere = False
                self._stopped = self._stopping = True
                self._cv.notify_all()
            listener = self._listener
        if stopping_elsewhere:
            # Another thread (an unrecoverable error's) is stopping it: return once it is done.
            self._stopped_done.wait(_STOP_WAIT_S)
            return False
        try:
            atexit.unregister(self.stop)
            self._stop_server()
            if listener is not None:
                listener.close()
            if self._own_workspace:
                shutil.rmtree(self._workspace, ignore_errors=True)
        finally:
            self._stopped_done.set()
        return True

    def is_alive(self) -> bool:
        return self._control is not None and not self._stopping and self._alive()

    def is_connected(self) -> bool:
        return self.is_alive()

    def connect(self) -> None:
        self.run()

    def get_access_token(self) -> Optional[str]:
        """The token the restricted endpoints require (TritonSecurityConfig); None when
        nothing is restricted."""
        return self._security_config.access_token if self._security_config.active else None

    @property
    def server(self) -> Optional[TritonServer]:
        """The tritonserver process (ports, log), once running."""
        return self._server

    # ----------------------------------------------------------------- internals

    def _on_unrecoverable(self, text: str) -> None:
        """PyTritonUnrecoverableError: the error responses go out, then everything stops."""
        LOGGER.error("Unrecoverable error; shutting down Triton Inference Server.\n%s", text)
        with self._lock:
            self._fatal = text
            self._stopping = True
            self._cv.notify_all()
        threading.Thread(target=self.stop, name="pytriton-stop", daemon=True).start()

    # What RemoteTriton does otherwise: where the server comes from and how it ends.

    def _start(self) -> ServerControl:
        """Start tritonserver; how to reach its control endpoints."""
        server = self._make_server()
        with self._lock:
            self._server = server
        server.start()
        return server.control()

    def _alive(self) -> bool:
        server = self._server
        return server is not None and server.is_alive()

    def _death_detail(self) -> str:
        server = self._server
        assert server is not None
        return (
            f"tritonserver exited unexpectedly (code {server.returncode}).\n--- log tail ---\n"
            f"{_tail(server.log_text())}"
        )

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.stop()

    def _log_tail(self) -> str:
        server = self._server
        return _tail(server.log_text()) if server is not None else ""

    def _load_body(self, binding: _Binding) -> Dict[str, Any]:
        return {}

    def _make_server(self) -> ControlledServer:
        c = self._config
        stop_timeout = float(max(2 * (c.exit_timeout_secs or 15), 10))
        security = self._security_config
        server = ControlledServer(
            self._repository,
            backend="ours",
            extra_args=server_args(c) + security.server_args(),
            model_control_mode="explicit",
            host=c.http_address or "0.0.0.0",
            http_port=c.http_port or 8000,
            grpc_port=c.grpc_port or 8001,
            metrics_port=c.metrics_port or 8002,
            stop_timeout=stop_timeout,
            metrics_interval_ms=None,  # Triton's, or TritonConfig's (in server_args)
        )
        server.protocol = self._protocol
        server.access_token = security.access_token if security.active else None
        return server

    def _load(self, model_name: str) -> None:
        with self._lock:
            binding = self._bindings[model_name]
        self._repository_call(model_name, "load", self._load_body(binding))

    def _repository_call(
        self, model_name: str, action: str, body_json: Optional[Dict[str, Any]] = None
    ) -> None:
        assert self._control is not None
        error = self._control.repository(model_name, action, body_json or {})
        if error is not None:
            raise PyTritonRuntimeError(
                f"Cannot {action} model {model_name}: {error}\n--- tritonserver log tail ---\n"
                f"{self._log_tail()}"
            )


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])
