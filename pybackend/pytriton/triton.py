"""``Triton``: PyTriton's server object, served by the real tritonserver with our backend in
attach mode: each model instance is a thread of this process (no proxy process, no second
copy). See docs/pytriton.md."""

from __future__ import annotations

import atexit
import dataclasses
import http.client
import logging
import os
import re
import shutil
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..server import locate
from ..server.tritonserver import ServerError, TritonServer
from ._attach import AttachListener, ModelFactory
from ._callable import CallableModel
from ._config import config_pbtxt, model_config_dict, named
from ._context import TritonContext, TritonModelConfig, inject
from .exceptions import (
    PyTritonInvalidOperationError,
    PyTritonRuntimeError,
    PyTritonValidationError,
)
from .model_config import ModelConfig, Tensor

LOGGER = logging.getLogger("pybackend.pytriton")

MONITORING_PERIOD_S = 10.0
_STOP_WAIT_S = 120.0
_MODEL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
# Fields of TritonConfig that are not tritonserver options of the same name.
_NOT_OPTIONS = {"model_repository", "http_address", "http_port", "grpc_port", "metrics_port"}


@dataclasses.dataclass
class TritonConfig:
    """tritonserver's options (PyTriton's fields); None leaves tritonserver's default.
    Every field is passed as ``--<field with dashes>=<value>``."""

    model_repository: Optional[Path] = None
    id: Optional[str] = None
    log_verbose: Optional[int] = None
    log_file: Optional[Path] = None
    exit_timeout_secs: Optional[int] = None
    exit_on_error: Optional[bool] = None
    strict_readiness: Optional[bool] = None
    allow_http: Optional[bool] = None
    http_address: Optional[str] = None
    http_port: Optional[int] = None
    http_header_forward_pattern: Optional[str] = None
    http_thread_count: Optional[int] = None
    http_restricted_api: Optional[str] = None
    allow_grpc: Optional[bool] = None
    grpc_address: Optional[str] = None
    grpc_port: Optional[int] = None
    grpc_header_forward_pattern: Optional[str] = None
    grpc_infer_allocation_pool_size: Optional[int] = None
    grpc_use_ssl: Optional[bool] = None
    grpc_use_ssl_mutual: Optional[bool] = None
    grpc_server_cert: Optional[Path] = None
    grpc_server_key: Optional[Path] = None
    grpc_root_cert: Optional[Path] = None
    grpc_infer_response_compression_level: Optional[str] = None
    grpc_keepalive_time: Optional[int] = None
    grpc_keepalive_timeout: Optional[int] = None
    grpc_keepalive_permit_without_calls: Optional[bool] = None
    grpc_http2_max_pings_without_data: Optional[int] = None
    grpc_http2_min_recv_ping_interval_without_data: Optional[int] = None
    grpc_http2_max_ping_strikes: Optional[int] = None
    grpc_restricted_protocol: Optional[str] = None
    allow_metrics: Optional[bool] = None
    allow_gpu_metrics: Optional[bool] = None
    allow_cpu_metrics: Optional[bool] = None
    metrics_interval_ms: Optional[int] = None
    metrics_port: Optional[int] = None
    metrics_address: Optional[str] = None
    allow_sagemaker: Optional[bool] = None
    sagemaker_port: Optional[int] = None
    sagemaker_safe_port_range: Optional[str] = None
    sagemaker_thread_count: Optional[int] = None
    allow_vertex_ai: Optional[bool] = None
    vertex_ai_port: Optional[int] = None
    vertex_ai_thread_count: Optional[int] = None
    vertex_ai_default_model: Optional[str] = None
    metrics_config: Optional[List[str]] = None
    trace_config: Optional[List[str]] = None
    cache_config: Optional[List[str]] = None
    cache_directory: Optional[str] = None
    buffer_manager_thread_count: Optional[int] = None

    def __post_init__(self) -> None:
        if self.allow_http not in (True, None) and self.allow_grpc not in (True, None):
            raise PyTritonValidationError("The `http` or `grpc` endpoint has to be allowed.")

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, config: Dict[str, Any]) -> TritonConfig:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: Dict[str, Any] = {}
        for name, value in config.items():
            if name not in fields:
                LOGGER.warning("Ignoring %s=%s: TritonConfig has no such field", name, value)
                continue
            values[name] = _cast(str(fields[name].type), value)
        return cls(**values)

    @classmethod
    def from_env(cls) -> TritonConfig:
        """PYTRITON_TRITON_CONFIG_<FIELD>=value (lists: <FIELD>_<index>)."""
        prefix = "PYTRITON_TRITON_CONFIG_"
        config: Dict[str, Any] = {}
        lists: Dict[str, Dict[int, str]] = {}
        for name, value in os.environ.items():
            if not name.startswith(prefix):
                continue
            key = name[len(prefix) :].lower()
            m = re.match(r"^(.+?)_(\d+)$", key)
            if m:
                lists.setdefault(m.group(1), {})[int(m.group(2))] = value
            else:
                config[key] = value
        for key, items in lists.items():
            config[key] = [items[i] for i in sorted(items)]
        return cls.from_dict(config)


def _cast(type_name: str, value: Any) -> Any:
    if value is None:
        return None
    if "List" in type_name:
        return value.split(",") if isinstance(value, str) else list(value)
    if "bool" in type_name:
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
    if "int" in type_name:
        return int(value)
    if "Path" in type_name:
        return Path(value)
    return str(value)


def _option_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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


class Triton:
    """Starts tritonserver, serves the bound callables from this process, stops it all."""

    def __init__(
        self,
        *,
        config: Optional[TritonConfig] = None,
        workspace: Union[str, Path, None] = None,
        triton_lifecycle_policy: Any = None,
        security_config: Any = None,
    ) -> None:
        merged = {k: v for k, v in TritonConfig.from_env().to_dict().items() if v is not None}
        if config is not None:
            merged.update({k: v for k, v in config.to_dict().items() if v is not None})
        self._config = TritonConfig(**merged)
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
        self._listener: Optional[AttachListener] = None
        self._stopped = False
        self._stopping = False
        self._stopped_done = threading.Event()
        self._fatal: Optional[str] = None
        self._triton_context = TritonContext()
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
            response_cache=c.response_cache,
        )
        text = config_pbtxt(
            model_config_dict(
                model_name,
                binding.inputs,
                binding.outputs,
                binding.config,
                len(funcs),
                self._socket_path,
            )
        )
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError("Cannot bind a model to a stopped Triton.")
            if model_name in self._bindings:
                raise PyTritonInvalidOperationError(f"Model {model_name} is already bound.")
            model_dir = self._repository / model_name
            model_dir.mkdir(parents=True, exist_ok=True)
            (model_dir / str(binding.version)).mkdir(exist_ok=True)
            (model_dir / "config.pbtxt").write_text(text)
            self._bindings[model_name] = binding
            for fn in funcs:
                inject(self._triton_context, fn, binding.model_config)
            running = self._server is not None
        if running:
            self._load(model_name)

    def unbind(self, model_name: str) -> None:
        """Unload ``model_name`` (its in-flight requests finish first) and forget it."""
        with self._lock:
            if model_name not in self._bindings:
                raise PyTritonInvalidOperationError(f"Model {model_name} is not bound.")
            running = self._server is not None
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
            )

        return make

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> Triton:
        self.run()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def run(self) -> None:
        """Start tritonserver (if not running) and load every bound model."""
        with self._lock:
            if self._stopped:
                raise PyTritonInvalidOperationError("This Triton was stopped; make a new one.")
            if self._server is not None:
                return
            self._listener = AttachListener(self._socket_path, self._factory)
            server = self._make_server()
            self._server = server
            names = list(self._bindings)
        try:
            server.start()
            for name in names:
                self._load(name)
        except BaseException:
            self.stop()
            raise

    def serve(self, monitoring_period_s: float = MONITORING_PERIOD_S) -> None:
        """run(), then block until Ctrl-C (or an unrecoverable error) and stop everything.
        Raises PyTritonRuntimeError when tritonserver dies meanwhile."""
        self.run()
        server = self._server
        assert server is not None
        try:
            with self._cv:
                while not self._stopping and server.is_alive():
                    self._cv.wait(timeout=min(monitoring_period_s, 1.0))
        except KeyboardInterrupt:
            LOGGER.info("SIGINT received, exiting.")
        died = not self._stopping and not server.is_alive()
        self.stop()
        if died:
            raise PyTritonRuntimeError(
                f"tritonserver exited unexpectedly (code {server.returncode}).\n--- log tail "
                f"---\n{_tail(server.log_text())}"
            )

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
            server, listener = self._server, self._listener
        if stopping_elsewhere:
            # Another thread (an unrecoverable error's) is stopping it: return once it is done.
            self._stopped_done.wait(_STOP_WAIT_S)
            return False
        try:
            atexit.unregister(self.stop)
            if server is not None:
                server.stop()
            if listener is not None:
                listener.close()
            if self._own_workspace:
                shutil.rmtree(self._workspace, ignore_errors=True)
        finally:
            self._stopped_done.set()
        return True

    def is_alive(self) -> bool:
        server = self._server
        return server is not None and not self._stopping and server.is_alive()

    def is_connected(self) -> bool:
        return self.is_alive()

    def connect(self) -> None:
        self.run()

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

    def _make_server(self) -> TritonServer:
        c = self._config
        extra: List[str] = []
        for f in dataclasses.fields(c):
            value = getattr(c, f.name)
            if value is None or f.name in _NOT_OPTIONS:
                continue
            option = "--" + f.name.replace("_", "-")
            values = value if isinstance(value, list) else [value]
            extra += [f"{option}={_option_value(v)}" for v in values]
        if c.cache_directory is None:
            # As PyTriton: the caches of the wheel's tritonserver (libtritoncache_local.so).
            caches = locate.tritonserver_binary().parent.parent / "caches"
            if caches.is_dir():
                extra.append(f"--cache-directory={caches}")
        stop_timeout = float(max(2 * (c.exit_timeout_secs or 15), 10))
        return TritonServer(
            self._repository,
            backend="ours",
            extra_args=extra,
            model_control_mode="explicit",
            host=c.http_address or "0.0.0.0",
            http_port=c.http_port or 8000,
            grpc_port=c.grpc_port or 8001,
            metrics_port=c.metrics_port or 8002,
            stop_timeout=stop_timeout,
        )

    def _load(self, model_name: str) -> None:
        self._repository_call(model_name, "load")

    def _repository_call(self, model_name: str, action: str) -> None:
        server = self._server
        assert server is not None
        path = f"/v2/repository/models/{urllib.parse.quote(model_name)}/{action}"
        host, port = server.http_url.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        try:
            conn.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
            reply = conn.getresponse()
            body = reply.read().decode(errors="replace")
        except OSError as e:
            raise PyTritonRuntimeError(f"Cannot {action} model {model_name}: {e}") from None
        finally:
            conn.close()
        if reply.status != 200:
            raise PyTritonRuntimeError(
                f"Cannot {action} model {model_name}: {body}\n--- tritonserver log tail ---\n"
                f"{_tail(server.log_text())}"
            )


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


__all__ = ["Triton", "TritonConfig", "ServerError"]
