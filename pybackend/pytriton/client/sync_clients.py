"""PyTriton's blocking ``ModelClient`` over tritonclient; DecoupledModelClient
(decoupled_client.py), FuturesModelClient (futures_client.py) and the asyncio clients
(asyncio_clients.py) build on it, and ``pytriton.client`` (this package's ``__init__``)
offers them all."""

from __future__ import annotations

import itertools
import socket
import time
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from .._context import TritonModelConfig, config_from_json
from .._security import auth_headers
from ..constants import DEFAULT_GRPC_PORT as DEFAULT_GRPC_PORT
from ..constants import DEFAULT_HTTP_PORT as DEFAULT_HTTP_PORT
from .exceptions import (
    PyTritonClientClosedError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from .utils import TritonUrl

DEFAULT_WAIT_S = 300.0
DEFAULT_INFERENCE_TIMEOUT_S = 60.0

Inputs = Union[Tuple[np.ndarray, ...], Dict[str, np.ndarray]]
Params = Optional[Dict[str, Union[str, int, bool]]]


def parse_url(url: str) -> Tuple[str, str]:
    """(scheme, "host:port") by PyTriton's rule (client/utils.py: TritonUrl)."""
    parsed = TritonUrl.from_url(url)
    return parsed.scheme, parsed.without_scheme


def _lib(scheme: str) -> Any:
    if scheme == "grpc":
        import tritonclient.grpc as lib
    else:
        import tritonclient.http as lib
    return lib


def verify_call(inputs: Tuple[Any, ...], named: Dict[str, Any], *params: Params) -> None:
    """PyTriton's checks of an inference call's arguments, with its texts."""
    if not inputs and not named:
        raise PyTritonClientValueError("Provide input data")
    if inputs and named:
        raise PyTritonClientValueError(
            "Use either positional either keyword method arguments convention"
        )
    for given in params:
        if given is None:
            continue
        if not isinstance(given, dict):
            raise PyTritonClientValueError("Parameters and headers must be a dictionary")
        for key, value in given.items():
            if not isinstance(key, str):
                raise PyTritonClientValueError("Parameter/header key must be a string")
            if not isinstance(value, (str, int, bool)):
                raise PyTritonClientValueError(
                    "Parameter/header value must be a string, integer or boolean"
                )


class ModelClient:
    """Synchronous inference on one model (HTTP or gRPC, by the url's scheme).

    ``access_token`` (a restricted server's, ``Triton.get_access_token()``) goes with every
    call: readiness, model configuration, inference, load/unload. Before its first inference
    the client waits for the model (``init_timeout_s``) and reads its configuration, unless
    it was given ``model_config`` with ``ensure_model_is_ready=False`` (PyTriton's rule)."""

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: Optional[str] = None,
        *,
        lazy_init: bool = True,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        model_config: Optional[TritonModelConfig] = None,
        ensure_model_is_ready: bool = True,
        access_token: Optional[str] = None,
    ) -> None:
        self._scheme, self._address = parse_url(url)
        self._url = url
        self._model_name = model_name
        self._model_version = model_version
        self._init_timeout_s = DEFAULT_WAIT_S if init_timeout_s is None else init_timeout_s
        self._inference_timeout_s = (
            DEFAULT_INFERENCE_TIMEOUT_S if inference_timeout_s is None else inference_timeout_s
        )
        self._model_config = model_config
        self._model_ready = model_config is not None and not ensure_model_is_ready
        self._access_token = access_token
        # Sent with every call this client makes (see _headers_with_token).
        self._token_headers = auth_headers(access_token, self._scheme)
        self._lib = self.get_lib()
        self._client: Any = self.create_client_from_url(url)
        self._ids = itertools.count(1)
        if not lazy_init:
            self._wait_and_init()

    @classmethod
    def from_existing_client(cls, existing_client: Any) -> Any:
        """A new client of this class for the same model, url, timeouts and access token,
        with the existing one's model configuration if it has read it (then without
        waiting for the model again). Unlike PyTriton 0.7.0's, a gRPC client's copy is a gRPC
        client (its copy went to the gRPC port over HTTP) and every class takes it."""
        return cls(
            existing_client._url,
            existing_client._model_name,
            existing_client._model_version,
            init_timeout_s=existing_client._init_timeout_s,
            inference_timeout_s=existing_client._inference_timeout_s,
            model_config=existing_client._model_config,
            ensure_model_is_ready=False,
            access_token=existing_client._access_token,
        )

    def get_lib(self) -> Any:
        """The tritonclient module of the url's scheme: ``tritonclient.grpc`` or ``.http``."""
        return _lib(self._scheme)

    def create_client_from_url(self, url: str, network_timeout_s: Optional[float] = None) -> Any:
        """A tritonclient ``InferenceServerClient`` for ``url``, as PyTriton makes it: over
        HTTP its connection and network timeouts are the inference timeout; tritonclient.grpc
        takes none (``network_timeout_s`` is accepted and, as in PyTriton, not used)."""
        scheme, address = parse_url(url)
        lib = _lib(scheme)
        if scheme == "grpc":
            return lib.InferenceServerClient(address)
        timeout = self._inference_timeout_s
        return lib.InferenceServerClient(
            address, connection_timeout=timeout, network_timeout=timeout
        )

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def model_config(self) -> TritonModelConfig:
        """The given configuration, or the server's (read once the model is ready)."""
        if self._model_config is None:
            self.wait_for_model(self._init_timeout_s)
            self._model_config = self._read_config()
        return self._model_config

    @property
    def is_batching_supported(self) -> bool:
        return self.model_config.max_batch_size > 0

    def wait_for_server(self, timeout_s: float) -> None:
        headers = self._headers_with_token()
        self._wait(timeout_s, lambda c: c.is_server_ready(headers=headers), "server")

    def wait_for_model(self, timeout_s: float) -> None:
        version = self._model_version or ""
        headers = self._headers_with_token()
        self._wait(
            timeout_s,
            lambda c: c.is_model_ready(self._model_name, version, headers=headers),
            "model",
        )

    def load_model(self, config: Optional[str] = None, files: Optional[dict] = None) -> None:
        self._live().load_model(
            self._model_name, config=config, files=files, headers=self._headers_with_token()
        )

    def unload_model(self) -> None:
        self._live().unload_model(self._model_name, headers=self._headers_with_token())

    # ----------------------------------------------------------------- inference

    def infer_sample(
        self,
        *inputs: np.ndarray,
        parameters: Params = None,
        headers: Params = None,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        """One sample: a batch dimension is added (and removed) when the model batches."""
        data = self._named(inputs, named_inputs, parameters, headers)
        if self.is_batching_supported:
            data = {k: v[np.newaxis, ...] for k, v in data.items()}
        result = self._infer(data, parameters, headers)
        if self.is_batching_supported:
            result = {k: v[0] for k, v in result.items()}
        return result

    def infer_batch(
        self,
        *inputs: np.ndarray,
        parameters: Params = None,
        headers: Params = None,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        data = self._named(inputs, named_inputs, parameters, headers)
        if not self.is_batching_supported:
            raise PyTritonClientModelDoesntSupportBatchingError(
                f"Model {self._model_name} doesn't support batching - use infer_sample method "
                "instead"
            )
        return self._infer(data, parameters, headers)

    def _named(
        self, inputs: Tuple[np.ndarray, ...], named: Dict[str, np.ndarray], *params: Params
    ) -> Dict[str, np.ndarray]:
        """The call's inputs by name, once its arguments are checked and the model is
        ready (the first call waits for it, as PyTriton's does)."""
        verify_call(inputs, named, *params)
        if not self._model_ready:
            self._wait_and_init()
        if inputs:
            return {spec.name: v for spec, v in zip(self.model_config.inputs or (), inputs)}
        return dict(named)

    def _request(self, data: Dict[str, np.ndarray]) -> Tuple[List[Any], List[Any]]:
        from tritonclient.utils import np_to_triton_dtype

        wrapped = []
        for name, array in data.items():
            if array.dtype.type == np.str_:
                raise RuntimeError(
                    "Unicode inputs are not supported. "
                    f"Encode numpy array for {name!r} input "
                    "(ex. with np.char.encode(array, 'utf-8'))."
                )
            item = self._lib.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            item.set_data_from_numpy(array)
            wrapped.append(item)
        outputs = [self._lib.InferRequestedOutput(o.name) for o in self.model_config.outputs or ()]
        return wrapped, outputs

    def _request_args(
        self, inputs: List[Any], outputs: List[Any], parameters: Any
    ) -> Dict[str, Any]:
        return {
            "model_name": self._model_name,
            "model_version": self._model_version or "",
            "inputs": inputs,
            "outputs": outputs,
            "request_id": str(next(self._ids)),
            "parameters": parameters,
        }

    def _infer(
        self, data: Dict[str, np.ndarray], parameters: Any, headers: Any
    ) -> Dict[str, np.ndarray]:
        if self.model_config.decoupled:
            raise PyTritonClientInferenceServerError(
                "Model config is decoupled. Use DecoupledModelClient instead."
            )
        inputs, outputs = self._request(data)
        from tritonclient.utils import InferenceServerException

        kwargs: Dict[str, Any] = {}
        if self._scheme == "grpc":
            kwargs["client_timeout"] = self._inference_timeout_s
        try:
            result = self._live().infer(
                **self._request_args(inputs, outputs, parameters),
                headers=self._headers_with_token(headers),
                **kwargs,
            )
        except InferenceServerException as e:
            if "Deadline Exceeded" in (e.message() or ""):
                raise PyTritonClientTimeoutError(
                    f"Timeout occurred during inference request. Timeout: "
                    f"{self._inference_timeout_s} s. Message: {e.message()}"
                ) from e
            raise PyTritonClientInferenceServerError(
                f"Error occurred during inference request. Message: {e.message()}"
            ) from e
        except (socket.timeout, OSError) as e:
            raise PyTritonClientTimeoutError(
                f"Timeout occurred during inference request. Timeout: "
                f"{self._inference_timeout_s} s Message: {e}"
            ) from e
        return as_numpy(result)

    # ----------------------------------------------------------------- internals

    def _headers_with_token(self, headers: Optional[Dict[str, Any]] = None) -> Any:
        """The access token's header (HTTP) or metadata (gRPC) with the caller's own
        headers, which win on a clash (as in PyTriton); None when there are none."""
        return {**self._token_headers, **(headers or {})} or None

    def _live(self) -> Any:
        if self._client is None:
            raise PyTritonClientClosedError("ModelClient is closed")
        return self._client

    def _wait(self, timeout_s: float, ready: Any, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        last_error = ""
        while True:
            try:
                if ready(self._live()):
                    return
            except PyTritonClientClosedError:
                raise
            except Exception as e:  # noqa: BLE001 - not up yet: the server refuses or resets
                last_error = str(e)
            if time.monotonic() > deadline:
                # The server's last refusal (a missing access token, say) tells why.
                why = f" Last error: {last_error}" if last_error else ""
                raise PyTritonClientTimeoutError(
                    f"Waiting for {what} {self._model_name} to be ready timed out.{why}"
                )
            time.sleep(0.1)

    def _wait_and_init(self) -> None:
        """Wait for the model (init_timeout_s), then read its configuration."""
        self.wait_for_model(self._init_timeout_s)
        self._model_ready = True
        self._model_config = self._read_config()

    def _read_config(self) -> TritonModelConfig:
        version = self._model_version or ""
        headers = self._headers_with_token()
        if self._scheme == "grpc":
            config = self._live().get_model_config(
                self._model_name, version, as_json=True, headers=headers
            )
            config = config.get("config", config)
        else:
            config = self._live().get_model_config(self._model_name, version, headers=headers)
        return config_from_json(config)


def as_numpy(result: Any) -> Dict[str, np.ndarray]:
    response = result.get_response()
    if isinstance(response, dict):
        names = [o["name"] for o in response.get("outputs", [])]
    else:
        names = [o.name for o in response.outputs]
    return {name: result.as_numpy(name) for name in names}
