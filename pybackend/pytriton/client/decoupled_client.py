"""PyTriton's ``DecoupledModelClient``: a ModelClient whose inferences stream a decoupled
model's responses over gRPC."""

from __future__ import annotations

import queue
import threading
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np

from .._context import TritonModelConfig
from .exceptions import (
    PyTritonClientInferenceServerError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from .sync_clients import ModelClient, Params, as_numpy, parse_url


class DecoupledModelClient(ModelClient):
    """gRPC streaming: infer_sample/infer_batch return an iterator of result dicts, one
    per response, ending with the final one."""

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
        # Refused before any call to the server (PyTriton 0.7.0 waits for the model first
        # when lazy_init=False, then refuses).
        if parse_url(url)[0] != "grpc":
            raise PyTritonClientValueError(
                "DecoupledModelClient is only supported for grpc protocol"
            )
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
        self._lock = threading.Lock()

    def _infer(self, data: Dict[str, np.ndarray], parameters: Any, headers: Any) -> Any:
        if not self.model_config.decoupled:
            raise PyTritonClientInferenceServerError(
                "Model config is coupled. Use ModelClient instead."
            )
        return self._stream(data, parameters, headers)

    def infer_sample(  # type: ignore[override]
        self,
        *inputs: np.ndarray,
        parameters: Params = None,
        headers: Params = None,
        **named_inputs: np.ndarray,
    ) -> Iterator[Dict[str, np.ndarray]]:
        data = self._named(inputs, named_inputs, parameters, headers)
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
            finished = False
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
                        yield as_numpy(result)
                    if final is not None and final.bool_param:
                        finished = True
                        return
            finally:
                # A stream left before its final response (the caller broke out of the loop
                # or closed this generator, a timeout, an error) is cancelled: the server
                # stops the request (a bound generator is closed) and stop_stream returns
                # at once instead of waiting for every response the request has left.
                client.stop_stream(cancel_requests=not finished)

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
