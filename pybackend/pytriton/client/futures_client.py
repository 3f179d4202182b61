"""PyTriton's ``FuturesModelClient``: each call returns a concurrent.futures.Future, run by
a pool of threads, each with a ModelClient of its own."""

from __future__ import annotations

import concurrent.futures
import sys
import threading
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from .exceptions import PyTritonClientClosedError, PyTritonClientQueueFullError
from .sync_clients import ModelClient, Params


class FuturesModelClient:
    """Calls queue for the pool's threads (``max_workers``, None: no limit). At most
    ``max_queue_size`` calls (None: no limit) wait for a thread; one more waits for room, at
    most ``inference_timeout_s`` (None: for as long as it takes), or with
    ``non_blocking=True`` is refused at once: PyTritonClientQueueFullError, as in PyTriton.
    The first thread's client reads the model's configuration; the others start from it
    (``ModelClient.from_existing_client``)."""

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: Optional[str] = None,
        *,
        max_workers: Optional[int] = 128,
        max_queue_size: Optional[int] = 128,
        non_blocking: bool = False,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        access_token: Optional[str] = None,
    ) -> None:
        if max_workers is not None and max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        if max_queue_size is not None and max_queue_size <= 0:
            raise ValueError("max_queue_size must be greater than 0")
        self._args = (url, model_name, model_version)
        # The per-thread clients' arguments (the asyncio clients add theirs).
        self._kwargs: Dict[str, Any] = {
            "init_timeout_s": init_timeout_s,
            "inference_timeout_s": inference_timeout_s,
            "access_token": access_token,
        }
        self._inference_timeout_s = inference_timeout_s
        self._non_blocking = non_blocking
        # Calls submitted and not yet taken by a thread (PyTriton's queue).
        self._room = None if max_queue_size is None else threading.Semaphore(max_queue_size)
        # ThreadPoolExecutor starts a thread only when none is idle: sys.maxsize is no limit.
        workers = sys.maxsize if max_workers is None else max_workers
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
        self._local = threading.local()
        self._clients: List[ModelClient] = []
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> FuturesModelClient:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self.close()

    def close(self, wait: bool = True) -> None:
        """No new calls; the queued ones still run. ``wait``: return once they have."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if wait:
            self._pool.shutdown(wait=True)
            self._close_clients()
        else:  # the clients close once the queued calls are done
            self._pool.shutdown(wait=False)
            threading.Thread(target=self._close_after_calls, daemon=True).start()

    def _close_after_calls(self) -> None:
        self._pool.shutdown(wait=True)
        self._close_clients()

    def _close_clients(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def _client(self) -> ModelClient:
        client = getattr(self._local, "client", None)
        if client is None:
            with self._lock:
                known = next((c for c in self._clients if c._model_config is not None), None)
            if known is not None:
                client = ModelClient.from_existing_client(known)
            else:
                client = ModelClient(*self._args, **self._kwargs)  # type: ignore[arg-type]
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def _submit(self, call: Callable[[ModelClient], Any]) -> "concurrent.futures.Future[Any]":
        if self._closed:
            raise PyTritonClientClosedError("FutureModelClient is already closed")
        room = self._room
        if room is not None:
            if self._non_blocking:
                taken = room.acquire(blocking=False)
            else:
                taken = room.acquire(timeout=self._inference_timeout_s)
            if not taken:
                raise PyTritonClientQueueFullError("Queue is full")

        def run() -> Any:
            if room is not None:
                room.release()  # taken by a thread: no longer queued
            return call(self._client())

        try:
            return self._pool.submit(run)
        except RuntimeError:  # shut down since the check above
            if room is not None:
                room.release()
            raise PyTritonClientClosedError("FutureModelClient is already closed") from None

    def wait_for_model(self, timeout_s: float) -> "concurrent.futures.Future[Any]":
        return self._submit(lambda client: client.wait_for_model(timeout_s))

    def model_config(self) -> "concurrent.futures.Future[Any]":
        return self._submit(lambda client: client.model_config)

    def infer_sample(
        self,
        *inputs: np.ndarray,
        parameters: Params = None,
        headers: Params = None,
        **named_inputs: np.ndarray,
    ) -> "concurrent.futures.Future[Any]":
        return self._submit(
            lambda client: client.infer_sample(
                *inputs, parameters=parameters, headers=headers, **named_inputs
            )
        )

    def infer_batch(
        self,
        *inputs: np.ndarray,
        parameters: Params = None,
        headers: Params = None,
        **named_inputs: np.ndarray,
    ) -> "concurrent.futures.Future[Any]":
        return self._submit(
            lambda client: client.infer_batch(
                *inputs, parameters=parameters, headers=headers, **named_inputs
            )
        )
