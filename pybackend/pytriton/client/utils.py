"""PyTriton's client helpers (``pytriton.client.utils``) over a tritonclient
``InferenceServerClient``: url parsing (``TritonUrl``), client creation, waiting for the
server and a model, a model's state and configuration. Same names, parameters, defaults,
results and exceptions as PyTriton 0.7. The model clients parse urls with TritonUrl too.

Where PyTriton 0.7 fails, this does not: ``get_model_config`` sends its ``headers`` (an
access token) while it waits for the model too, so it works against a server that
restricts ``health`` (docs/pytriton.md)."""

from __future__ import annotations

import dataclasses
import enum
import logging
import socket
import time
import urllib.parse
import warnings
from typing import Any, Dict, Optional, Tuple

from ..constants import DEFAULT_GRPC_PORT, DEFAULT_HTTP_PORT
from ..model_config.parser import ModelConfigParser
from ..model_config.triton_model_config import TritonModelConfig
from .exceptions import PyTritonClientInvalidUrlError, PyTritonClientTimeoutError
from .warnings import NotSupportedTimeoutWarning

_LOGGER = logging.getLogger(__name__)

_DEFAULT_NETWORK_TIMEOUT_S = 60.0
_DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S = 60.0
_DEFAULT_WAIT_FOR_MODEL_TIMEOUT_S = 300.0
#: How often readiness is asked again; PyTriton asks each second, sooner is only quicker.
_POLL_S = 0.1

#: How a model version of None (the latest) is written in messages.
LATEST_MODEL_VERSION = "<latest>"


class ModelState(enum.Enum):
    """A model's state in the server's repository index."""

    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"
    READY = "READY"


def _states(entries: Any) -> Dict[Tuple[str, str], ModelState]:
    """(name, version) -> state; an entry without a version is skipped, one without a
    state is LOADING (PyTriton's reading of the index)."""
    out = {}
    for name, version, state in entries:
        if version:
            out[(name, version)] = ModelState(state) if state else ModelState.LOADING
    return out


def parse_http_response(models: Any) -> Dict[Tuple[str, str], ModelState]:
    """The HTTP repository index (a list of dicts) as {(name, version): state}."""
    return _states((m.get("name"), m.get("version"), m.get("state")) for m in models)


def parse_grpc_response(models: Any) -> Dict[Tuple[str, str], ModelState]:
    """The gRPC repository index's ``models`` as {(name, version): state}."""
    return _states((m.name, m.version, m.state) for m in models)


def get_model_state(
    client: Any,
    model_name: str,
    model_version: Optional[str] = None,
    headers: Optional[dict] = None,
) -> ModelState:
    """The model's state from the repository index: of ``model_version``, or with None of
    its numerically greatest version; UNAVAILABLE when the index does not list it."""
    index = client.get_model_repository_index(headers=headers)
    if isinstance(index, list):
        states = parse_http_response(models=index)
    else:
        states = parse_grpc_response(models=index.models)
    if model_version is not None:
        return states.get((model_name, model_version), ModelState.UNAVAILABLE)
    versions = {v: s for (n, v), s in states.items() if n == model_name}
    if not versions:
        return ModelState.UNAVAILABLE
    return versions[max(versions, key=int)]


def get_model_config(
    client: Any,
    model_name: str,
    model_version: Optional[str] = None,
    timeout_s: Optional[float] = None,
    headers: Optional[dict] = None,
) -> TritonModelConfig:
    """Wait for the model (``timeout_s``, 300 s by default), then read its configuration
    as a TritonModelConfig."""
    wait_for_model_ready(client, model_name, model_version, timeout_s=timeout_s, headers=headers)
    version = model_version or ""
    import tritonclient.grpc

    if isinstance(client, tritonclient.grpc.InferenceServerClient):
        config = client.get_model_config(model_name, version, as_json=True, headers=headers)
        config = config["config"]
    else:
        config = client.get_model_config(model_name, version, headers=headers)
    return ModelConfigParser.from_dict(config)


def _warn_on_too_big_network_timeout(client: Any, timeout_s: float) -> None:
    """PyTriton warns when an HTTP client's own timeouts exceed the wait (one probe may
    then outlast it)."""
    pool = getattr(getattr(client, "_client_stub", None), "_connection_pool", None)
    if pool is None or timeout_s <= 0:
        return
    network = getattr(pool, "network_timeout", None)
    connection = getattr(pool, "connection_timeout", None)
    rtol = 0.001
    if any(t is not None and (t - timeout_s) / timeout_s > rtol for t in (network, connection)):
        warnings.warn(
            "Client network and/or connection timeout is smaller than requested timeout_s. "
            "This may cause unexpected behavior. "
            f"network_timeout={network} connection_timeout={connection} timeout_s={timeout_s}",
            NotSupportedTimeoutWarning,
            stacklevel=2,
        )


def _server_ready(client: Any, headers: Optional[dict]) -> bool:
    from grpc import RpcError
    from tritonclient.utils import InferenceServerException

    try:
        return bool(
            client.is_server_ready(headers=headers) and client.is_server_live(headers=headers)
        )
    except (InferenceServerException, RpcError, ConnectionError, socket.gaierror):
        return False  # not up yet (refused, resolving, starting): ask again


def wait_for_server_ready(
    client: Any,
    timeout_s: Optional[float] = None,
    headers: Optional[dict] = None,
) -> None:
    """Wait until the server is ready and live (``timeout_s``, 60 s by default), else
    PyTritonClientTimeoutError."""
    timeout_s = _DEFAULT_WAIT_FOR_SERVER_READY_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    _warn_on_too_big_network_timeout(client, timeout_s)
    while not _server_ready(client, headers):
        if time.monotonic() >= deadline:
            raise PyTritonClientTimeoutError("Waiting for server to be ready timed out.")
        time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))


def wait_for_model_ready(
    client: Any,
    model_name: str,
    model_version: Optional[str] = None,
    timeout_s: Optional[float] = None,
    headers: Optional[dict] = None,
) -> None:
    """Wait for the server, then for the model to be ready, both within ``timeout_s``
    (300 s by default), else PyTritonClientTimeoutError."""
    version = model_version or ""
    shown = version or LATEST_MODEL_VERSION
    timeout_s = _DEFAULT_WAIT_FOR_MODEL_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    wait_for_server_ready(client, timeout_s=timeout_s, headers=headers)
    while not client.is_model_ready(model_name, version, headers=headers):
        if time.monotonic() >= deadline:
            raise PyTritonClientTimeoutError(
                f"Waiting for model {model_name}/{shown} to be ready timed out."
            )
        time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))


def create_client_from_url(url: str, network_timeout_s: Optional[float] = None) -> Any:
    """A tritonclient ``InferenceServerClient`` for ``url`` (no scheme: http; no port:
    the scheme's default). Over HTTP ``network_timeout_s`` is its connection and network
    timeout; tritonclient.grpc has none, which a NotSupportedTimeoutWarning says."""
    parsed = TritonUrl.from_url(url)
    if parsed.scheme == "grpc":
        import tritonclient.grpc

        timeout = _DEFAULT_NETWORK_TIMEOUT_S if network_timeout_s is None else network_timeout_s
        warnings.warn(
            "tritonclient.grpc doesn't support timeout for other commands than infer. "
            f"Ignoring network_timeout: {timeout}.",
            NotSupportedTimeoutWarning,
            stacklevel=2,
        )
        return tritonclient.grpc.InferenceServerClient(parsed.without_scheme)
    import tritonclient.http

    kwargs: Dict[str, float] = {}
    if network_timeout_s is not None:
        kwargs = {"connection_timeout": network_timeout_s, "network_timeout": network_timeout_s}
    return tritonclient.http.InferenceServerClient(parsed.without_scheme, **kwargs)


@dataclasses.dataclass
class TritonUrl:
    """A server's url: ``TritonUrl.from_url("localhost:8000")`` is
    ``TritonUrl("http", "localhost", 8000)``."""

    scheme: str
    hostname: str
    port: int

    @classmethod
    def from_url(cls, url: Any) -> TritonUrl:
        """Parse ``url``; PyTritonClientInvalidUrlError unless it is http or grpc."""
        if not isinstance(url, str):
            raise PyTritonClientInvalidUrlError(f"Invalid url {url}. Url must be a string.")
        try:
            parsed = urllib.parse.urlparse(url)
            # "host:port" parses as scheme "host": such a url (no "://") is http's.
            if (not parsed.scheme and "://" not in parsed.path) or (
                parsed.scheme and not parsed.netloc
            ):
                parsed = urllib.parse.urlparse(f"http://{url}")
            scheme = parsed.scheme.lower()
            if scheme not in ("grpc", "http"):
                raise ValueError(f"Invalid scheme {scheme}. Only grpc and http are supported.")
            port = parsed.port or {"grpc": DEFAULT_GRPC_PORT, "http": DEFAULT_HTTP_PORT}[scheme]
        except ValueError as e:
            raise PyTritonClientInvalidUrlError(f"Invalid url {url}") from e
        return cls(scheme, parsed.hostname, port)  # type: ignore[arg-type]

    @property
    def with_scheme(self) -> str:
        return f"{self.scheme}://{self.hostname}:{self.port}"

    @property
    def without_scheme(self) -> str:
        return f"{self.hostname}:{self.port}"
