"""One request to a Triton server (tritonserver, or `pybackend devserve`) over HTTP or
gRPC, or a decoupled model's stream of responses over gRPC, with tritonclient; its
errors as :class:`ClientError` in the server's words."""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, List, Optional, Sequence, Tuple

import numpy as np

from pybackend.errors import PybackendError

from .infer_inputs import InputSpec

Outputs = Dict[str, np.ndarray]

#: How often a stream's caller hears from it while a response is awaited (``while_waiting``).
WATCH_S = 0.2


# The server's refusal of a request without a correlation id to a model behind the sequence
# batcher, and what to give this command then.
NO_SEQUENCE = "must specify a non-zero or non-empty correlation ID"
SEQUENCE_HINT = (
    " (the model is stateful: give --sequence-id ID, with --sequence-start on a sequence's "
    "first request and --sequence-end on its last)"
)


class ClientError(PybackendError):
    """The server could not be reached, or answered with an error; ``status``: the error's
    status as tritonclient gives it (gRPC: ``StatusCode.NOT_FOUND``; HTTP: ``400``), or
    ``"UNREACHABLE"``, or None."""

    def __init__(self, message: str, status: Optional[str] = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    model: str
    version: str  # "": the server's choice
    arrays: Outputs  # the inputs by name
    specs: Sequence[InputSpec]  # the model's inputs, for their data types
    outputs: Sequence[str]  # those asked for ([]: all)
    # tritonclient's sequence_id, sequence_start, sequence_end, as given ({}: none)
    sequence: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Target:
    protocol: str  # http or grpc
    address: str  # host:port


def target(url: str, grpc: bool) -> Target:
    """``grpc://h:p``, ``http://h:p`` or ``h:p`` (HTTP unless ``grpc``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return Target("grpc" if grpc else "http", url)
    if scheme not in ("http", "grpc"):
        raise ClientError(f"{url}: the scheme must be http:// or grpc://")
    return Target(scheme, rest.rstrip("/"))


class Client:
    def __init__(
        self,
        where: Target,
        timeout: float,
        timeout_option: str = "--timeout",
        headers: Optional[Dict[str, str]] = None,
    ) -> None:
        self.where = where
        self.timeout = timeout
        self.timeout_option = timeout_option  # named where a wait runs out
        #: Sent with every call (gRPC metadata, HTTP headers): a restricted server's token.
        self.headers = dict(headers) if headers else None
        try:
            if where.protocol == "grpc":
                import tritonclient.grpc as module
            else:
                import tritonclient.http as module  # type: ignore[no-redef]
        except ImportError as e:
            raise ClientError(
                f"{where.protocol} needs tritonclient: "
                f"pip install 'tritonclient[{where.protocol}]' ({e})"
            ) from None
        self.module: Any = module
        kwargs = (
            {}
            if where.protocol == "grpc"
            else {"network_timeout": timeout, "connection_timeout": timeout}
        )
        self.client: Any = module.InferenceServerClient(where.address, **kwargs)

    def close(self) -> None:
        self.client.close()

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        from tritonclient.utils import InferenceServerException

        try:
            return fn()
        except InferenceServerException as e:
            text = str(e.message() or e)
            if NO_SEQUENCE in text:
                text += SEQUENCE_HINT
            raise ClientError(f"{what}: {text}", _status(e)) from None
        except OSError as e:  # refused connection, name resolution, timeout
            raise ClientError(
                f"cannot reach {self.where.protocol}://{self.where.address}: {e}", "UNREACHABLE"
            ) from None

    def _json(self, fn: Callable[..., Any], *args: Any) -> Dict[str, Any]:
        if self.where.protocol == "grpc":
            return dict(fn(*args, headers=self.headers, as_json=True, client_timeout=self.timeout))
        return dict(fn(*args, headers=self.headers))

    def config_of(self, model: str, version: str = "") -> Dict[str, Any]:
        """The model's configuration as the server holds it."""
        got = self._call(
            f"model '{model}'", lambda: self._json(self.client.get_model_config, model, version)
        )
        return dict(got.get("config", got))  # gRPC wraps it

    def repository_index(self) -> List[Dict[str, Any]]:
        """The models of the server's repository, with their state."""
        if self.where.protocol == "grpc":
            index = self._call(
                "repository index",
                lambda: self.client.get_model_repository_index(
                    headers=self.headers, as_json=True, client_timeout=self.timeout
                ),
            )
            return list(index.get("models", []))
        return list(
            self._call(
                "repository index",
                lambda: self.client.get_model_repository_index(headers=self.headers),
            )
        )

    def inputs_of(self, model: str, version: str) -> Tuple[List[InputSpec], bool]:
        """The model's inputs (metadata), and whether it is decoupled (its config)."""
        meta = self._call(
            f"model '{model}'", lambda: self._json(self.client.get_model_metadata, model, version)
        )
        config = self.config_of(model, version)
        optional = {i["name"] for i in config.get("input", []) if i.get("optional")}
        decoupled = bool((config.get("model_transaction_policy") or {}).get("decoupled"))
        return [
            InputSpec(
                i["name"],
                i["datatype"],
                [int(d) for d in i.get("shape", [])],
                i["name"] in optional,
            )
            for i in meta.get("inputs", [])
        ], decoupled

    def _inputs(self, req: "Request") -> List[Any]:
        types = {s.name: s.datatype for s in req.specs}
        made = []
        for name, array in req.arrays.items():
            item = self.module.InferInput(name, list(array.shape), types[name])
            item.set_data_from_numpy(array)
            made.append(item)
        return made

    def _outputs(self, req: "Request") -> Optional[List[Any]]:
        return [self.module.InferRequestedOutput(n) for n in req.outputs] or None

    def infer(self, req: "Request") -> List[Tuple[str, str, np.ndarray]]:
        kwargs: Dict[str, Any] = {
            "model_version": req.version,
            "outputs": self._outputs(req),
            "headers": self.headers,
            **req.sequence,
        }
        if self.where.protocol == "grpc":
            kwargs["client_timeout"] = self.timeout
        result = self._call(
            f"model '{req.model}'",
            lambda: self.client.infer(req.model, self._inputs(req), **kwargs),
        )
        return _named(result)

    def stream(
        self, req: "Request", while_waiting: Optional[Callable[[], None]] = None
    ) -> Generator[List[Tuple[str, str, np.ndarray]], None, None]:
        """A decoupled model's responses, each as it arrives, until the final one; each
        wait for the next is bounded by the timeout. ``while_waiting``: called every
        ``WATCH_S`` while a response is awaited; what it raises ends the stream (the request
        is cancelled in the server)."""
        if self.where.protocol != "grpc":
            raise ClientError("--stream needs gRPC: give the URL as grpc://HOST:PORT")
        events: "queue.Queue[Tuple[Any, Any]]" = queue.Queue()
        self._call(
            "stream",
            lambda: self.client.start_stream(
                callback=lambda result, error: events.put((result, error)), headers=self.headers
            ),
        )
        finished = False
        try:
            self._call(
                f"model '{req.model}'",
                lambda: self.client.async_stream_infer(
                    req.model,
                    self._inputs(req),
                    model_version=req.version,
                    outputs=self._outputs(req),
                    enable_empty_final_response=True,  # how the end of the stream shows
                    **req.sequence,
                ),
            )
            while True:
                result, error = self._next_event(events, req.model, while_waiting)
                if error is not None:
                    raise ClientError(
                        f"model '{req.model}': {error.message() or error}", _status(error)
                    )
                response = result.get_response()
                named = _named(result)
                final = response.parameters["triton_final_response"].bool_param
                # A response the model sent without outputs is one (numbered, shown empty);
                # only the FINAL flag sent alone comes as an empty final response.
                if named or not final:
                    yield named
                if final:
                    finished = True
                    return
        finally:
            self.client.stop_stream(cancel_requests=not finished)

    def _next_event(
        self,
        events: "queue.Queue[Tuple[Any, Any]]",
        model: str,
        while_waiting: Optional[Callable[[], None]],
    ) -> Tuple[Any, Any]:
        """The stream's next (result, error), within the timeout; ``while_waiting`` is
        called between waits of at most ``WATCH_S``."""
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientError(
                    f"model '{model}': no response within {self.timeout:g} s "
                    f"({self.timeout_option})",
                    "TIMEOUT",
                )
            try:
                return events.get(timeout=left if while_waiting is None else min(left, WATCH_S))
            except queue.Empty:
                if while_waiting is not None:
                    while_waiting()


def _status(error: Any) -> Optional[str]:
    status = error.status() if hasattr(error, "status") else None
    return None if status is None else str(status)


def _named(result: Any) -> List[Tuple[str, str, np.ndarray]]:
    response = result.get_response()
    outputs = response["outputs"] if isinstance(response, dict) else response.outputs
    named = []
    for out in outputs:
        name = out["name"] if isinstance(out, dict) else out.name
        datatype = out["datatype"] if isinstance(out, dict) else out.datatype
        named.append((name, datatype, result.as_numpy(name)))
    return named
