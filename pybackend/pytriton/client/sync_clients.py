"""PyTriton's blocking clients (``ModelClient``, ``DecoupledModelClient``,
``FuturesModelClient``) over tritonclient; the asyncio ones build on them
(asyncio_clients.py), and ``pytriton.client`` (this package's ``__init__``) offers both."""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import socket
import threading
import time
import urllib.parse
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from .._context import TritonModelConfig, config_from_json
from .._security import auth_headers
from .exceptions import (
    PyTritonClientClosedError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)

DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
_DEFAULT_WAIT_S = 300.0
_DEFAULT_INFERENCE_TIMEOUT_S = 60.0

Inputs = Union[Tuple[np.ndarray, ...], Dict[str, np.ndarray]]


def parse_url(url: str) -> Tuple[str, str]:
    """(scheme, "host:port"): no scheme means http; no port, the scheme's default."""
    if not isinstance(url, str):
        raise PyTritonClientInvalidUrlError(f"Invalid url {url}. Url must be a string.")
    parsed = urllib.parse.urlparse(url if "://" in url else f"http://{url}")
    scheme = parsed.scheme.lower()
    if scheme not in ("http", "grpc"):
        raise PyTritonClientInvalidUrlError(f"Invalid url {url}. Only grpc and http are supported.")
    port = parsed.port or (DEFAULT_HTTP_PORT if scheme == "http" else DEFAULT_GRPC_PORT)
    return scheme, f"{parsed.hostname}:{port}"


def _lib(scheme: str) -> Any:
    if scheme == "grpc":
        import tritonclient.grpc as lib
    else:
        import tritonclient.http as lib
    return lib


class ModelClient:
    """Synchronous inference on one model (HTTP or gRPC, by the url's scheme).

    ``access_token`` (a restricted server's, ``Triton.get_access_token()``) goes with every
    call: readiness, model configuration, inference, load/unload."""

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
        self._init_timeout_s = _DEFAULT_WAIT_S if init_timeout_s is None else init_timeout_s
        self._inference_timeout_s = (
            _DEFAULT_INFERENCE_TIMEOUT_S if inference_timeout_s is None else inference_timeout_s
        )
        self._model_config = model_config
        self._ensure_model_is_ready = ensure_model_is_ready
        # Sent with every call this client makes (see _headers_with_token).
        self._token_headers = auth_headers(access_token, self._scheme)
        self._lib = _lib(self._scheme)
        self._client: Any = self._make_client()
        self._ids = itertools.count(1)
        if not lazy_init:
            self._init_model()

    def _make_client(self) -> Any:
        if self._scheme == "grpc":
            return self._lib.InferenceServerClient(self._address)
        timeout = self._inference_timeout_s
        return self._lib.InferenceServerClient(
            self._address, connection_timeout=timeout, network_timeout=timeout
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
        if self._model_config is None:
            self._init_model()
        assert self._model_config is not None
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
        parameters: Optional[Dict[str, Union[str, int, bool]]] = None,
        headers: Optional[Dict[str, Union[str, int, bool]]] = None,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        """One sample: a batch dimension is added (and removed) when the model batches."""
        data = self._named(inputs, named_inputs)
        if self.is_batching_supported:
            data = {k: v[np.newaxis, ...] for k, v in data.items()}
        result = self._infer(data, parameters, headers)
        if self.is_batching_supported:
            result = {k: v[0] for k, v in result.items()}
        return result

    def infer_batch(
        self,
        *inputs: np.ndarray,
        parameters: Optional[Dict[str, Union[str, int, bool]]] = None,
        headers: Optional[Dict[str, Union[str, int, bool]]] = None,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        if not self.is_batching_supported:
            raise PyTritonClientModelDoesntSupportBatchingError(
                f"Model {self._model_name} doesn't support batching - use infer_sample method "
                "instead"
            )
        return self._infer(self._named(inputs, named_inputs), parameters, headers)

    def _named(
        self, inputs: Tuple[np.ndarray, ...], named: Dict[str, np.ndarray]
    ) -> Dict[str, np.ndarray]:
        if inputs and named:
            raise PyTritonClientValueError(
                "Use either positional either keyword method arguments convention"
            )
        if inputs:
            return {spec.name: v for spec, v in zip(self.model_config.inputs, inputs)}  # type: ignore[misc]
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
        outputs = [self._lib.InferRequestedOutput(o.name) for o in self.model_config.outputs]
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
        return _as_numpy(result)

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

    def _init_model(self) -> None:
        if self._ensure_model_is_ready:
            self.wait_for_model(self._init_timeout_s)
        version = self._model_version or ""
        headers = self._headers_with_token()
        if self._scheme == "grpc":
            config = self._live().get_model_config(
                self._model_name, version, as_json=True, headers=headers
            )
            config = config.get("config", config)
        else:
            config = self._live().get_model_config(self._model_name, version, headers=headers)
        self._model_config = config_from_json(config)


def _as_numpy(result: Any) -> Dict[str, np.ndarray]:
    response = result.get_response()
    if isinstance(response, dict):
        names = [o["name"] for o in response.get("outputs", [])]
    else:
        names = [o.name for o in response.outputs]
    return {name: result.as_numpy(name) for name in names}


class DecoupledModelClient(ModelClient):
    """gRPC streaming: infer_sample/infer_batch return an iterator of result dicts, one
    per response, ending with the final one."""

    def __init__(
        self, url: str, model_name: str, model_version: Optional[str] = None, **kwargs: Any
    ) -> None:
        super().__init__(url, model_name, model_version, **kwargs)
        if self._scheme != "grpc":
            raise PyTritonClientValueError(
                "DecoupledModelClient is only supported for grpc protocol"
            )
        self._lock = threading.Lock()

    def _infer(self, data: Dict[str, np.ndarray], parameters: Any, headers: Any) -> Any:
        if not self.model_config.decoupled:
            raise PyTritonClientInferenceServerError(
                "Model config is coupled. Use ModelClient instead."
            )
        return self._stream(data, parameters, headers)

    def infer_sample(
        self, *inputs: np.ndarray, parameters: Any = None, headers: Any = None, **named: np.ndarray
    ) -> Any:  # type: ignore[override]
        data = self._named(inputs, named)
        batching = self.is_batching_supported
        if batching:
            data = {k: v[np.newaxis, ...] for k, v in data.items()}
        for result in self._infer(data, parameters, headers):
            yield {k: v[0] for k, v in result.items()} if batching else result

    def _stream(
        self, data: Dict[str, np.ndarray], parameters: Any, headers: Any
    ) -> Iterator[Dict[str, np.ndarray]]:
        inputs, outputs = self._request(data)
        answers: "queue.Queue[Tuple[Any, Any]]" = queue.Queue()
        client = self._live()
        with self._lock:
            client.start_stream(
                callback=lambda result, error: answers.put((result, error)),
                headers=self._headers_with_token(headers),
            )
            try:
                self._send_on_stream(client, answers, inputs, outputs, parameters)
                while True:
                    try:
                        result, error = answers.get(timeout=self._inference_timeout_s)
                    except queue.Empty:
                        raise PyTritonClientTimeoutError(
                            f"Timeout occurred during inference request. Timeout: "
                            f"{self._inference_timeout_s} s"
                        ) from None
                    if error is not None:
                        raise PyTritonClientInferenceServerError(
                            f"Error occurred during inference request. Message: {error}"
                        )
                    response = result.get_response()
                    final = response.parameters.get("triton_final_response")
                    if response.outputs:
                        yield _as_numpy(result)
                    if final is not None and final.bool_param:
                        return
            finally:
                client.stop_stream()

    def _send_on_stream(
        self, client: Any, answers: "queue.Queue[Tuple[Any, Any]]", *request: Any
    ) -> None:
        from tritonclient.utils import InferenceServerException

        try:
            client.async_stream_infer(
                **self._request_args(*request), enable_empty_final_response=True
            )
        except InferenceServerException as e:
            # A stream the server ended at once (a missing access token, say) only says
            # "no longer in valid state"; the server's reason went to the callback.
            try:
                _, error = answers.get_nowait()
            except queue.Empty:
                error = e.message()
            raise PyTritonClientInferenceServerError(
                f"Error occurred during inference request. Message: {error or e.message()}"
            ) from e


class FuturesModelClient:
    """Each call returns a concurrent.futures.Future; a pool of threads, each with its own
    ModelClient, runs them."""

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: Optional[str] = None,
        *,
        max_workers: int = 128,
        max_queue_size: int = 128,
        non_blocking: bool = False,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        access_token: Optional[str] = None,
    ) -> None:
        self._args = (url, model_name, model_version)
        self._kwargs = {
            "init_timeout_s": init_timeout_s,
            "inference_timeout_s": inference_timeout_s,
            "access_token": access_token,
        }
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers)
        self._local = threading.local()
        self._clients: List[ModelClient] = []
        self._lock = threading.Lock()

    def __enter__(self) -> FuturesModelClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait)
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()

    def _client(self) -> ModelClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = ModelClient(*self._args, **self._kwargs)  # type: ignore[arg-type]
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def _submit(self, name: str, *args: Any, **kwargs: Any) -> "concurrent.futures.Future[Any]":
        return self._pool.submit(lambda: getattr(self._client(), name)(*args, **kwargs))

    def wait_for_model(self, timeout_s: float) -> "concurrent.futures.Future[Any]":
        return self._submit("wait_for_model", timeout_s)

    def model_config(self) -> "concurrent.futures.Future[Any]":
        return self._pool.submit(lambda: self._client().model_config)

    def infer_sample(self, *inputs: np.ndarray, **kwargs: Any) -> "concurrent.futures.Future[Any]":
        return self._submit("infer_sample", *inputs, **kwargs)

    def infer_batch(self, *inputs: np.ndarray, **kwargs: Any) -> "concurrent.futures.Future[Any]":
        return self._submit("infer_batch", *inputs, **kwargs)
