"""The Triton server behind the endpoint, over gRPC: its models' configurations, and one
generation as the pieces the model sends. A decoupled model streams (each response as it
comes); a stream the client abandons is cancelled in the server, which a model sees as
``request.is_cancelled()`` / ``response_sender.is_cancelled()``."""

from __future__ import annotations

from typing import Any, Dict, Generator, List, Mapping, Tuple

import numpy as np

from pybackend.cli.infer_client import Client, ClientError, Request, target
from pybackend.cli.infer_inputs import InputSpec
from pybackend.errors import PybackendError

from .convention import TextModel
from .requests import ApiError

#: How tritonclient's gRPC status names map to HTTP statuses of the answer.
_HTTP = {
    "StatusCode.INVALID_ARGUMENT": 400,
    "StatusCode.NOT_FOUND": 404,
    "StatusCode.UNAVAILABLE": 503,
    "StatusCode.RESOURCE_EXHAUSTED": 429,
    "StatusCode.DEADLINE_EXCEEDED": 504,
    "StatusCode.UNIMPLEMENTED": 501,
    "UNREACHABLE": 503,
    "TIMEOUT": 504,
}


def api_error(error: ClientError) -> ApiError:
    return ApiError(_HTTP.get(error.status or "", 500), str(error))


class Upstream:
    """A tritonserver's gRPC endpoint (``host:port`` or ``grpc://host:port``); each wait for
    its next response is bounded by ``timeout`` seconds."""

    def __init__(self, url: str, timeout: float) -> None:
        self.where = target(url, grpc=True)
        if self.where.protocol != "grpc":
            raise PybackendError(
                f"{url}: the endpoint speaks to tritonserver over gRPC: give its gRPC port "
                "as HOST:PORT or grpc://HOST:PORT (8001 by default)"
            )
        self.timeout = timeout

    def client(self) -> Client:
        """A client of its own per request: tritonclient's holds one stream at a time."""
        return Client(self.where, self.timeout, timeout_option="--openai-timeout")

    def config(self, client: Client, model: str) -> Dict[str, Any]:
        try:
            return client.config_of(model)
        except ClientError as e:
            # gRPC says UNAVAILABLE both for a model the server lacks and for no server.
            if e.status == "StatusCode.UNAVAILABLE" and not _live(client):
                raise ApiError(503, f"Triton is not reachable: {e}") from None
            if e.status in ("StatusCode.NOT_FOUND", "StatusCode.UNAVAILABLE", None):
                raise ApiError(
                    404,
                    f"The model `{model}` does not exist or is not ready ({e})",
                    param="model",
                    code="model_not_found",
                ) from None
            raise api_error(e) from None

    def ready_models(self, client: Client) -> List[str]:
        try:
            index = client.repository_index()
        except ClientError as e:
            raise api_error(e) from None
        return sorted({m["name"] for m in index if m.get("state") == "READY"})

    def generate(
        self, client: Client, model: TextModel, tensors: Mapping[str, np.ndarray]
    ) -> Generator[Dict[str, np.ndarray], None, None]:
        """The outputs of each response, in order; closing the iterator before its end
        cancels the request in the server. Errors: ApiError."""
        specs = [
            InputSpec(name, _wire(model.inputs[name].data_type), list(array.shape))
            for name, array in tensors.items()
        ]
        request = Request(model.name, "", dict(tensors), specs, [])
        try:
            if model.decoupled:
                stream = client.stream(request)
                try:
                    for named in stream:
                        yield _by_name(named)
                finally:
                    stream.close()  # before its end: cancels the request in the server
            else:
                yield _by_name(client.infer(request))
        except ClientError as e:
            raise api_error(e) from None


def _by_name(outputs: List[Tuple[str, str, np.ndarray]]) -> Dict[str, np.ndarray]:
    return {name: array for name, _, array in outputs}


def _live(client: Client) -> bool:
    try:
        return bool(client.client.is_server_live())
    except Exception:  # noqa: BLE001 - whatever the client raises: not reachable
        return False


def _wire(data_type: str) -> str:
    """A config data type (TYPE_FP32, TYPE_STRING) as the protocol names it (FP32, BYTES)."""
    name = data_type.replace("TYPE_", "")
    return "BYTES" if name == "STRING" else name
