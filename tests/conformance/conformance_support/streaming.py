"""gRPC streaming (decoupled models) with tritonclient: every response, in arrival order,
with the final flag Triton marks when the client asks for empty final responses."""

from __future__ import annotations

import queue
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from .clients import make_input


@dataclass
class Event:
    """One message of the stream: a response (outputs, final flag) or an error."""

    request_id: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    final: bool = False
    error: str | None = None
    status: str = ""

    def value(self, name: str = "OUT") -> Any:
        item = self.outputs[name].reshape(-1)[0]
        return item.decode() if isinstance(item, bytes) else int(item)


class Stream:
    """One gRPC stream; use as a context manager (the stream and client are closed on exit)."""

    def __init__(self, server: Any) -> None:
        self.client = grpcclient.InferenceServerClient(server.grpc_url)
        self.events: queue.Queue[Event] = queue.Queue()
        self.client.start_stream(callback=self._on_message)
        self.closed = False

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self, cancel: bool = False) -> None:
        if not self.closed:
            self.closed = True
            self.client.stop_stream(cancel_requests=cancel)
            self.client.close()

    def _on_message(self, result: Any, error: Any) -> None:
        if error is not None:
            status = error.status() if isinstance(error, InferenceServerException) else ""
            text = error.message() if isinstance(error, InferenceServerException) else str(error)
            self.events.put(Event(error=text, status=str(status), final=True))
            return
        response = result.get_response()
        final_param = response.parameters.get("triton_final_response")
        event = Event(request_id=response.id, final=bool(final_param and final_param.bool_param))
        for out in response.outputs:
            event.outputs[out.name] = result.as_numpy(out.name)
        self.events.put(event)

    def send(
        self, model: str, inputs: Mapping[str, np.ndarray], request_id: str = "", **kwargs: Any
    ) -> None:
        """``kwargs`` go to ``async_stream_infer`` (sequence_id, sequence_start, ...)."""
        infer_inputs = [make_input("grpc", name, array) for name, array in inputs.items()]
        self.client.async_stream_infer(
            model, infer_inputs, request_id=request_id, enable_empty_final_response=True, **kwargs
        )

    def next(self, timeout: float = 30.0) -> Event:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no stream message within {timeout} s") from None

    def until_final(self, count: int = 1, timeout: float = 30.0) -> list[Event]:
        """Every event until ``count`` requests ended (final flag or an error)."""
        deadline = time.monotonic() + timeout
        events: list[Event] = []
        ended = 0
        while ended < count:
            event = self.next(max(0.01, deadline - time.monotonic()))
            events.append(event)
            ended += event.final
        return events

    def quiet(self, seconds: float) -> list[Event]:
        """Whatever arrives within ``seconds`` (for checking that nothing more comes)."""
        deadline = time.monotonic() + seconds
        events = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                events.append(self.events.get(timeout=left))
            except queue.Empty:
                break
        return events


def stream_once(
    server: Any, model: str, inputs: Mapping[str, np.ndarray], timeout: float = 30.0
) -> list[Event]:
    """One request on a fresh stream: its events up to and including its end."""
    with Stream(server) as stream:
        stream.send(model, inputs, request_id="r0")
        return stream.until_final(1, timeout)
