"""PyTriton's asyncio clients: the synchronous clients of this package run on threads of
their own, so no call blocks the event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, AsyncGenerator, AsyncIterator, Dict, Optional, Tuple, Union

import numpy as np

from .._context import TritonModelConfig
from .decoupled_client import DecoupledModelClient
from .exceptions import PyTritonClientValueError
from .futures_client import FuturesModelClient
from .sync_clients import (
    DEFAULT_INFERENCE_TIMEOUT_S,
    DEFAULT_WAIT_S,
    ModelClient,
    parse_url,
)

_Params = Optional[Dict[str, Union[str, int, bool]]]
_END = object()


class AsyncioModelClient:
    """``await client.infer_sample(...)`` / ``infer_batch``: ModelClients run on a pool of
    threads (one client per thread), so no call blocks the event loop. ``lazy_init=False``:
    ``async with`` waits for the model and reads its configuration; ``model_config``,
    ``ensure_model_is_ready``: as ModelClient's. ``access_token`` is ours (PyTriton 0.7.0's
    asyncio clients take none)."""

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
        self._url = url
        self._scheme, _ = parse_url(url)
        self._model_name = model_name
        self._model_version = model_version
        self._lazy_init = lazy_init
        self._init_timeout_s = DEFAULT_WAIT_S if init_timeout_s is None else init_timeout_s
        self._inference_timeout_s = (
            DEFAULT_INFERENCE_TIMEOUT_S if inference_timeout_s is None else inference_timeout_s
        )
        self._model_config = model_config
        self._access_token = access_token
        # No queue limit: a full queue would block the event loop.
        self._futures = FuturesModelClient(
            url,
            model_name,
            model_version,
            max_queue_size=None,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            access_token=access_token,
        )
        self._futures._kwargs.update(
            model_config=model_config, ensure_model_is_ready=ensure_model_is_ready
        )

    @classmethod
    def from_existing_client(cls, existing_client: Any) -> Any:
        """As ModelClient.from_existing_client."""
        return ModelClient.from_existing_client.__func__(cls, existing_client)  # type: ignore[attr-defined]

    def get_lib(self) -> Any:
        """The tritonclient module of the url's scheme: ``tritonclient.grpc.aio`` or
        ``tritonclient.http.aio``."""
        if self._scheme == "grpc":
            import tritonclient.grpc.aio as lib
        else:
            import tritonclient.http.aio as lib
        return lib

    def create_client_from_url(self, url: str, network_timeout_s: Optional[float] = None) -> Any:
        """A tritonclient asyncio ``InferenceServerClient`` for ``url``, as PyTriton makes it
        (over HTTP ``conn_timeout`` is the inference timeout; ``network_timeout_s`` is not
        used)."""
        scheme, address = parse_url(url)
        if scheme == "grpc":
            import tritonclient.grpc.aio as grpc_aio

            return grpc_aio.InferenceServerClient(address)
        import tritonclient.http.aio as http_aio

        return http_aio.InferenceServerClient(address, conn_timeout=self._inference_timeout_s)

    async def __aenter__(self) -> AsyncioModelClient:
        if not self._lazy_init:
            try:
                await self.wait_for_model(self._init_timeout_s)
                await self.model_config
            except BaseException:
                await self.close()
                raise
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._futures.close()

    async def wait_for_model(self, timeout_s: float) -> None:
        """Wait for the server and the model to be ready: at most ``timeout_s``, and at most
        the client's ``init_timeout_s`` (as PyTriton's)."""
        timeout_s = min(timeout_s, self._init_timeout_s)
        await asyncio.wrap_future(self._futures.wait_for_model(timeout_s))

    @property
    async def model_config(self) -> TritonModelConfig:
        """``await client.model_config``: the given configuration, or the server's."""
        config = await asyncio.wrap_future(self._futures.model_config())
        self._model_config = config
        return config

    async def infer_sample(
        self,
        *inputs: np.ndarray,
        parameters: _Params = None,
        headers: _Params = None,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        future = self._futures.infer_sample(
            *inputs, parameters=parameters, headers=headers, **named_inputs
        )
        return await asyncio.wrap_future(future)

    async def infer_batch(
        self,
        *inputs: np.ndarray,
        parameters: _Params = None,
        headers: _Params = None,
        **named_inputs: np.ndarray,
    ) -> Dict[str, np.ndarray]:
        future = self._futures.infer_batch(
            *inputs, parameters=parameters, headers=headers, **named_inputs
        )
        return await asyncio.wrap_future(future)


class AsyncioDecoupledModelClient(AsyncioModelClient):
    """``async for result in client.infer_sample(...)`` (or ``infer_batch``): one dict of
    numpy arrays per response of a decoupled model, over a gRPC stream.

    Each call streams through a DecoupledModelClient of its own on a thread of its own, so
    concurrent streams do not wait on each other and a slow one never blocks the loop. A
    consumer that stops iterating early (break, cancellation) closes that stream."""

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
        super().__init__(
            url,
            model_name,
            model_version,
            lazy_init=lazy_init,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            ensure_model_is_ready=ensure_model_is_ready,
            access_token=access_token,
        )
        self._stream_args = (url, model_name, model_version)
        self._stream_kwargs: Dict[str, Any] = {
            "init_timeout_s": init_timeout_s,
            "inference_timeout_s": inference_timeout_s,
            "ensure_model_is_ready": ensure_model_is_ready,
            "access_token": access_token,
        }
        # Read once by the first stream, then handed to the next ones.
        self._config = model_config

    async def infer_sample(  # type: ignore[override]
        self,
        *inputs: np.ndarray,
        parameters: _Params = None,
        headers: _Params = None,
        **named_inputs: np.ndarray,
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        """One sample (a batch dimension added and removed when the model batches)."""
        kwargs = {"parameters": parameters, "headers": headers, **named_inputs}
        responses = self._responses("infer_sample", inputs, kwargs)
        try:
            async for result in responses:
                yield result
        finally:  # the stream stops as soon as the consumer closes this generator
            await responses.aclose()

    async def infer_batch(  # type: ignore[override]
        self,
        *inputs: np.ndarray,
        parameters: _Params = None,
        headers: _Params = None,
        **named_inputs: np.ndarray,
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        kwargs = {"parameters": parameters, "headers": headers, **named_inputs}
        responses = self._responses("infer_batch", inputs, kwargs)
        try:
            async for result in responses:
                yield result
        finally:  # the stream stops as soon as the consumer closes this generator
            await responses.aclose()

    async def _responses(
        self, method: str, inputs: Tuple[np.ndarray, ...], kwargs: Dict[str, Any]
    ) -> AsyncGenerator[Dict[str, np.ndarray], None]:
        if self._scheme != "grpc":
            raise PyTritonClientValueError(
                "AsyncioDecoupledModelClient is only supported for grpc protocol"
            )
        loop = asyncio.get_running_loop()
        # One thread per stream: next() and close() of the blocking generator run on it in
        # order, never at once; each next() waits at most inference_timeout_s.
        worker = concurrent.futures.ThreadPoolExecutor(1, "pytriton-async-stream")
        client = DecoupledModelClient(
            *self._stream_args, model_config=self._config, **self._stream_kwargs
        )
        responses: Any = None
        cancelled = False
        try:
            responses = await loop.run_in_executor(
                worker, self._start, client, method, inputs, kwargs
            )
            while True:
                result: Any = await loop.run_in_executor(worker, next, responses, _END)
                if result is _END:
                    return
                yield result
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            closing = worker.submit(_close, responses, client)
            worker.shutdown(wait=False)
            # A cancelled consumer is not held up: the close runs once the pending next()
            # returns. Otherwise the stream is stopped before the caller goes on.
            if not cancelled:
                await asyncio.wrap_future(closing)

    def _start(
        self,
        client: DecoupledModelClient,
        method: str,
        inputs: Tuple[np.ndarray, ...],
        kwargs: Dict[str, Any],
    ) -> Any:
        # Reads the model's configuration (waiting for it to be ready) the first time.
        self._config = client.model_config
        return getattr(client, method)(*inputs, **kwargs)


def _close(responses: Any, client: DecoupledModelClient) -> None:
    if responses is not None:
        responses.close()  # its finally stops the gRPC stream
    client.close()
