"""``TritonConfig``: tritonserver's options as PyTriton names them, and the command-line
arguments they become."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..server import locate
from .exceptions import PyTritonValidationError

LOGGER = logging.getLogger("pybackend.pytriton")
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


@dataclasses.dataclass
class TritonLifecyclePolicy:
    """PyTriton's policy (``pytriton.triton.TritonLifecyclePolicy``). Only
    ``launch_triton_on_startup`` matters here: False makes ``with Triton(...)`` start
    nothing, the server then starts at run()/serve() with the models bound by then.
    ``local_model_store`` is accepted: the model store is always this process's own."""

    launch_triton_on_startup: bool = True
    local_model_store: bool = False


DefaultTritonLifecyclePolicy = TritonLifecyclePolicy()
VertextAILifecyclePolicy = TritonLifecyclePolicy(
    launch_triton_on_startup=False, local_model_store=True
)


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


def server_args(c: TritonConfig) -> List[str]:
    """``--<field-with-dashes>=<value>`` for every field set, but those TritonServer takes as
    arguments of its own (addresses and ports)."""
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
    return extra
