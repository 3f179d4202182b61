"""``RemoteTriton``: PyTriton's binding into a tritonserver that already runs (see
docs/pytriton.md); importable from ``pybackend.pytriton.triton`` as in PyTriton."""

from __future__ import annotations

import base64
import time
import urllib.parse
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ._control import ServerControl
from ._security import TritonSecurityConfig
from ._triton import LOGGER, REMOTE_READY_TIMEOUT_S, Triton, _Binding
from .exceptions import PyTritonRuntimeError, PyTritonValidationError


class RemoteTriton(Triton):
    """Binds into a tritonserver that already runs, on this host, with pybackend's backend
    as its python backend and ``--model-control-mode=explicit`` (e.g. ``pybackend serve``):
    each model is loaded with its configuration through the repository API, and that
    server's instances attach to this process. stop() unloads them; the server goes on."""

    def __init__(
        self,
        url: str,
        workspace: Union[str, Path, None] = None,
        access_token: Optional[str] = None,
        startup_timeout_s: float = REMOTE_READY_TIMEOUT_S,
    ) -> None:
        # No security config of its own: the server's restrictions are set where it runs,
        # access_token is the one it requires.
        super().__init__(
            workspace=workspace,
            security_config=TritonSecurityConfig(access_token, restricted_endpoints=[]),
        )
        parsed = urllib.parse.urlparse(url if "://" in url else f"http://{url}")
        if parsed.scheme not in ("http", "grpc"):
            raise PyTritonValidationError(
                f"RemoteTriton needs the server's HTTP or gRPC url, got {url}"
            )
        port = parsed.port or (8000 if parsed.scheme == "http" else 8001)
        self._remote = ServerControl(f"{parsed.hostname}:{port}", parsed.scheme, access_token)
        self._ready_timeout_s = startup_timeout_s

    def _start(self) -> ServerControl:
        # Waits as PyTriton's RemoteTriton does: a server still starting, or one where a
        # model is loading or unloading (strict readiness), is not ready for a moment.
        where = self._remote.address
        deadline = time.monotonic() + self._ready_timeout_s
        while True:
            ready = self._remote.ready()
            if ready:
                return self._remote
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        waited = f"after {self._ready_timeout_s:g} s"
        if ready is None:
            raise PyTritonRuntimeError(f"No Triton Inference Server answers at {where} {waited}")
        raise PyTritonRuntimeError(
            f"Triton Inference Server at {where} is not ready {waited}: a model of that "
            "server may be failing to load (see its log), or its readiness endpoint needs an "
            "access_token"
        )

    def _alive(self) -> bool:
        return bool(self._remote.live())

    def _death_detail(self) -> str:
        return f"Triton Inference Server at {self._remote.address} stopped answering."

    def _stop_server(self) -> None:
        if self._control is None:
            return
        with self._lock:
            names = list(self._bindings)
        for name in names:
            try:
                self._repository_call(name, "unload")
            except PyTritonRuntimeError as e:
                LOGGER.warning("%s", e)

    def _log_tail(self) -> str:
        return "(the server's log is where that server writes it)"

    def _load_body(self, binding: _Binding) -> Dict[str, Any]:
        # The configuration, and a version directory for the server to create: the model has
        # no file of its own (its instances attach to this process).
        marker = base64.b64encode(b"# served by the process that called RemoteTriton.bind\n")
        params = {
            "config": binding.config_json,
            f"file:{binding.version}/model.py": marker.decode(),
        }
        for path, content in binding.files.items():  # the warmup data
            params[f"file:{path}"] = base64.b64encode(content).decode()
        return {"parameters": params}
