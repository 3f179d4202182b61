"""PyTriton's asyncio clients: the synchronous clients of this package run on executor
threads, so no call blocks the event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, AsyncIterator, Dict, Optional, Tuple, Union

import numpy as np

from .._context import TritonModelConfig
from .exceptions import PyTritonClientValueError
from .sync_clients import DecoupledModelClient, FuturesModelClient, parse_url

_Params = Optional[Dict[str, Union[str, int, bool]]]
_END = object()


class AsyncioModelClient:
    """``await client.infer_sample(...)`` / ``infer_batch``: the synchronous client run in
    the loop's default executor (one client per executor thread)."""

    def __init__(
        self, url: str, model_name: str, model_version: Optional[str] = None, **kwargs: Any
    ) -> None:
        kwargs.pop("lazy_init", None)
        self._futures = FuturesModelClient(url, model_name, model_version, **kwargs)

    async def __aenter__(self) -> AsyncioModelClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._futures.close()

    async def infer_sample(self, *inputs: np.ndarray, **kwargs: Any) -> Dict[str, np.ndarray]:
        return await asyncio.wrap_future(self._futures.infer_sample(*inputs, **kwargs))

    async def infer_batch(self, *inputs: np.ndarray, **kwargs: Any) -> Dict[str, np.ndarray]:
        return await asyncio.wrap_future(self._futures.infer_batch(*inputs, **kwargs))

    async def model_config(self) -> TritonModelConfig:
        return await asyncio.wrap_future(self._futures.model_config())


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
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            access_token=access_token,
        )
        self._scheme, _ = parse_url(url)
        self._stream_args = (url, model_name, model_version)
        self._stream_kwargs: Dict[str, Any] = {
            "init_timeout_s": init_timeout_s,
            "inference_timeout_s": inference_timeout_s,
            "ensure_model_is_ready": ensure_model_is_ready,
            "access_token": access_token,
        }
        # Read once by the first stream, then handed to the next ones.
        self._config = model_config

    def infer_sample(  # type: ignore[override]
        self,
        *inputs: np.ndarray,
        parameters: _Params = None,
        headers: _Params = None,
        **named_inputs: np.ndarray,
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        """One sample (a batch dimension added and removed when the model batches)."""
        kwargs = {"parameters": parameters, "headers": headers, **named_inputs}
        return self._responses("infer_sample", inputs, kwargs)

    def infer_batch(  # type: ignore[override]
        self,
        *inputs: np.ndarray,
        parameters: _Params = None,
        headers: _Params = None,
        **named_inputs: np.ndarray,
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        kwargs = {"parameters": parameters, "headers": headers, **named_inputs}
        return self._responses("infer_batch", inputs, kwargs)

    async def _responses(
        self, method: str, inputs: Tuple[np.ndarray, ...], kwargs: Dict[str, Any]
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
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
