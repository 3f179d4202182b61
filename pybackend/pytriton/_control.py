"""How ``Triton`` talks to tritonserver's control endpoints (readiness, liveness, model
load and unload): over HTTP, or over gRPC when ``TritonConfig(allow_http=False)``, with the
access token of ``TritonSecurityConfig`` on every call."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, Dict, Optional, Tuple

from ..server.http_call import http_call
from ..server.tritonserver import TritonServer
from ._security import auth_headers
from .exceptions import PyTritonRuntimeError

_PROBE_TIMEOUT_S = 2.0
_LOAD_TIMEOUT_S = 600.0  # a load runs the model's initialize and warmup


class ServerControl:
    """``address`` is host:port of the HTTP endpoint, or of the gRPC one when
    ``protocol == "grpc"``."""

    def __init__(self, address: str, protocol: str, access_token: Optional[str]) -> None:
        self.address = address
        self.protocol = protocol
        self._headers = auth_headers(access_token, protocol)

    # ----------------------------------------------------------------- health

    def ready(self) -> Optional[bool]:
        """None when nothing answers."""
        return self._health("ready")

    def live(self) -> Optional[bool]:
        return self._health("live")

    def _health(self, what: str) -> Optional[bool]:
        if self.protocol == "grpc":
            import tritonclient.grpc as grpcclient
            from tritonclient.utils import InferenceServerException

            try:
                with grpcclient.InferenceServerClient(self.address) as client:
                    probe = client.is_server_ready if what == "ready" else client.is_server_live
                    return bool(probe(headers=self._headers, client_timeout=_PROBE_TIMEOUT_S))
            except InferenceServerException:
                return None
        status = self._http("GET", f"/v2/health/{what}", None, _PROBE_TIMEOUT_S)
        return None if status is None else status[0] == 200

    # ----------------------------------------------------------------- models

    def repository(self, model_name: str, action: str, body: Dict[str, Any]) -> Optional[str]:
        """Load or unload ``model_name``; the server's error text, None on success.
        ``body`` is the HTTP load body (``{"parameters": {"config": ..., "file:...": ...}}``)."""
        if self.protocol == "grpc":
            return self._grpc_repository(model_name, action, body)
        path = f"/v2/repository/models/{urllib.parse.quote(model_name)}/{action}"
        result = self._http("POST", path, json.dumps(body).encode(), _LOAD_TIMEOUT_S)
        if result is None:
            raise PyTritonRuntimeError(
                f"Cannot {action} model {model_name}: no answer from {self.address}"
            )
        status, text = result
        return None if status == 200 else text

    def _grpc_repository(self, model_name: str, action: str, body: Dict[str, Any]) -> Optional[str]:
        import base64

        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException

        params = body.get("parameters", {})
        files = {k: base64.b64decode(v) for k, v in params.items() if k.startswith("file:")} or None
        try:
            with grpcclient.InferenceServerClient(self.address) as client:
                if action == "load":
                    client.load_model(
                        model_name,
                        headers=self._headers,
                        config=params.get("config"),
                        files=files,
                        client_timeout=_LOAD_TIMEOUT_S,
                    )
                else:
                    client.unload_model(
                        model_name, headers=self._headers, client_timeout=_LOAD_TIMEOUT_S
                    )
        except InferenceServerException as e:
            return str(e)
        return None

    def _http(
        self, method: str, path: str, body: Optional[bytes], timeout: float
    ) -> Optional[Tuple[int, str]]:
        host, port = self.address.rsplit(":", 1)
        answer = http_call(
            host, int(port), method, path, timeout=timeout, body=body, headers=self._headers
        )
        return None if answer is None else (answer[0], answer[1].decode(errors="replace"))


class ControlledServer(TritonServer):
    """The tritonserver a ``Triton`` starts: readiness asked through ``ServerControl`` (so it
    works with HTTP off and with the health endpoint restricted)."""

    protocol = "http"
    access_token: Optional[str] = None
    # The models are the bindings', loaded and unloaded by ``Triton`` through ServerControl
    # (with its token, over gRPC when HTTP is off): the launcher leaves them alone.
    unload_before_stop = False

    def control(self) -> ServerControl:
        address = self.grpc_url if self.protocol == "grpc" else self.http_url
        return ServerControl(address, self.protocol, self.access_token)

    def is_ready(self) -> bool:
        return bool(self.control().ready())
