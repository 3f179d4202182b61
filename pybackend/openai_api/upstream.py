"""The Triton server behind the endpoint, over gRPC: its models' configurations, and one
generation as the pieces the model sends. A decoupled model streams (each response as it
comes); a stream the client abandons is cancelled in the server, which a model sees as
``request.is_cancelled()`` / ``response_sender.is_cancelled()``."""

from __future__ import annotations

import functools
import itertools
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import (
    Callable,
    ContextManager,
    Dict,
    Generator,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
)

import numpy as np

from pybackend.cli.infer_client import Client, ClientError, Request, target
from pybackend.cli.infer_inputs import InputSpec
from pybackend.errors import PybackendError

from .client_pool import ClientPool
from .config_cache import CONFIG_TTL, Config, ConfigCache, Read
from .embedding import BadVector, EmbeddingModel
from .model_io import TritonModel
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


#: Statuses of a call whose connection may be broken (gRPC says UNAVAILABLE also for a model
#: that is not ready: its client is then replaced needlessly, which costs only time).
_CONNECTION_LOST = ("UNREACHABLE", "StatusCode.UNAVAILABLE")

#: Texts of one embeddings request in flight at once (each lane a thread and a gRPC
#: client, leased for the request's time).
PARALLEL = 8
T = TypeVar("T")
R = TypeVar("R")
#: Statuses a request keeps even when the model's configuration changed meanwhile.
_NOT_RETRIED = (429, 504)

#: How the vLLM backend refuses an embedding request to a model of another task.
NOT_EMBEDDING = "does not support 'embed' request"


def api_error(error: ClientError) -> ApiError:
    """tritonserver's error as the answer. A 500 is a model's failure (its execute raised, or
    it answered an error): the same request fails again, so OpenAI's SDKs are told not to
    run it twice more. A decoupled model's error is always one: its stream's error carries no
    status (tritonserver's triton_grpc_error header would carry it, but 2.51 can crash right
    after such a stream ends with an error, docs/qa_coverage.md), so its INVALID_ARG is a 500
    too."""
    status = _HTTP.get(error.status or "", 500)
    return ApiError(status, str(error), final=status == 500)


class Upstream:
    """A tritonserver's gRPC endpoint (``host:port`` or ``grpc://host:port``); each wait for
    its next response is bounded by ``timeout`` seconds; its models' configurations are kept
    ``config_ttl`` seconds (config_cache.py)."""

    def __init__(
        self,
        url: str,
        timeout: float,
        headers: Optional[Mapping[str, str]] = None,
        config_ttl: float = CONFIG_TTL,
    ) -> None:
        self.where = target(url, grpc=True)
        if self.where.protocol != "grpc":
            raise PybackendError(
                f"{url}: the endpoint speaks to tritonserver over gRPC: give its gRPC port "
                "as HOST:PORT or grpc://HOST:PORT (8001 by default)"
            )
        self.timeout = timeout
        #: gRPC metadata sent with every call: a restricted server's token (tritonserver's
        #: --grpc-restricted-protocol; PyTriton restricts model-repository by default).
        self.headers = dict(headers or {})

        self.clients = ClientPool(self._new_client)
        self.configs = ConfigCache(config_ttl)

    def _new_client(self) -> Client:
        return Client(
            self.where, self.timeout, timeout_option="--openai-timeout", headers=self.headers
        )

    def client(self) -> ContextManager[Client]:
        """A client for one request (``with``): tritonclient's holds one stream at a time;
        kept for the next request when this one ends (client_pool.py)."""
        return self.clients.lease()

    def close(self) -> None:
        self.clients.close()

    def ready(self) -> bool:
        """Whether tritonserver answers that it is ready (False when it cannot be reached)."""
        try:
            with self.client() as client:
                return bool(
                    client.client.is_server_ready(
                        headers=client.headers, client_timeout=self.timeout
                    )
                )
        except Exception:  # noqa: BLE001 - unreachable or failing: not ready
            return False

    def config(self, client: Client, model: str) -> Read:
        """The model's configuration, kept or read (errors: ApiError, a 404 for a model the
        server lacks or has not ready)."""
        return self.configs.get(model, lambda: self._read_config(client, model))

    def with_config(
        self, model: str, attempt: Callable[[Config], T], client: Optional[Client] = None
    ) -> T:
        """``attempt(config)`` with the model's configuration; where it fails on a kept
        configuration that has changed since (a reload), once more with the new one. The
        reads use ``client``, or a client leased for each. A model gone since is the
        re-read's 404.

        Failures that a stale configuration can cause are retried: the server's refusal of
        the request (400, 404, 501, 503) and 500, which is also how a decoupled model's
        refusal comes (its stream's error has no code); a model whose ``execute`` failed on
        the old version then runs on the new one. Never a 504 (the wait ran out: once is
        enough) or a 429."""

        def using(step: Callable[[Client, str], R]) -> Callable[[], R]:
            if client is not None:
                return functools.partial(step, client, model)
            return functools.partial(self._leased, step, model)

        read = using(self.config)()
        try:
            return attempt(read.config)
        except ApiError as e:
            if not read.kept or e.status in _NOT_RETRIED:
                raise
            if not self.configs.changed(model, read.config, using(self._read_config)):
                raise
        return attempt(using(self.config)().config)

    def _leased(self, read: Callable[[Client, str], R], model: str) -> R:
        with self.client() as client:
            return read(client, model)

    def _read_config(self, client: Client, model: str) -> Config:
        try:
            return client.config_of(model)
        except ClientError as e:
            # gRPC says UNAVAILABLE both for a model the server lacks and for no server.
            if e.status == "StatusCode.UNAVAILABLE" and not _live(client):
                self.clients.spoil(client)
                raise ApiError(503, f"Triton is not reachable: {e}") from None
            if e.status in ("StatusCode.NOT_FOUND", "StatusCode.UNAVAILABLE", None):
                raise ApiError(
                    404,
                    f"The model `{model}` does not exist or is not ready ({e})",
                    param="model",
                    code="model_not_found",
                ) from None
            raise self._failed(client, e) from None

    def ready_models(self, client: Client) -> List[str]:
        try:
            index = client.repository_index()
        except ClientError as e:
            raise self._failed(client, e) from None
        return sorted({m["name"] for m in index if m.get("state") == "READY"})

    def generate(
        self,
        client: Client,
        model: TritonModel,
        tensors: Mapping[str, np.ndarray],
        while_waiting: Optional[Callable[[], None]] = None,
    ) -> Generator[Dict[str, np.ndarray], None, None]:
        """The outputs of each response, in order; closing the iterator before its end
        cancels the request in the server, and so does what ``while_waiting`` raises (called
        every few hundred milliseconds while a decoupled model's response is awaited).
        Errors: ApiError."""
        specs = [
            InputSpec(name, _wire(model.inputs[name].data_type), list(array.shape))
            for name, array in tensors.items()
        ]
        request = Request(model.name, "", dict(tensors), specs, [])
        try:
            if model.decoupled:
                stream = client.stream(request, while_waiting)
                try:
                    for named in stream:
                        yield _by_name(named)
                finally:
                    stream.close()  # before its end: cancels the request in the server
            else:
                yield _by_name(client.infer(request))
        except ClientError as e:
            raise self._failed(client, e) from None

    def _failed(self, client: Client, error: ClientError) -> ApiError:
        """The answer for a failed call of ``client``'s; a client whose connection may be
        broken is not kept (an ApiError keeps it otherwise: it may become an error event of
        a stream instead of reaching the lease)."""
        if error.status in _CONNECTION_LOST:
            self.clients.spoil(client)
        return api_error(error)

    def embed(
        self, model: EmbeddingModel, texts: List[str], dimensions: Optional[int]
    ) -> Tuple[List[np.ndarray], int]:
        """Each text's vector, one Triton request each, in ``PARALLEL`` lanes of one gRPC
        client each (a batching model's dynamic batcher joins their requests); and the
        texts' token count (0 unless every answer gives one). The first failure stops the
        lanes at their next text. Errors: ApiError, BadValue."""
        requests = [model.tensors(text, dimensions) for text in texts]  # refusals first
        vectors: List[Optional[np.ndarray]] = [None] * len(requests)
        counts: List[Optional[int]] = [None] * len(requests)
        failures: List[Exception] = []  # the first stops every lane

        def lane(indices: List[int]) -> None:
            try:
                with self.client() as client:
                    for i in indices:
                        if failures:
                            return
                        vectors[i], counts[i] = self._embed_one(
                            client, model, requests[i], dimensions
                        )
            except Exception as e:  # noqa: BLE001 - raised on the request's thread below
                failures.append(e)

        lanes = min(PARALLEL, len(requests))
        with ThreadPoolExecutor(lanes) as pool:
            for k in range(lanes):
                pool.submit(lane, list(range(k, len(requests), lanes)))
        if failures:
            raise failures[0]
        got = [v for v in vectors if v is not None]
        assert len(got) == len(vectors), "a lane ended without a failure or every vector"
        if len({v.size for v in got}) > 1:
            raise ApiError(
                500,
                f"model '{model.name}' answered vectors of different lengths "
                f"({sorted({v.size for v in got})}) for one request",
            )
        total = 0 if None in counts else sum(c for c in counts if c is not None)
        return got, total

    def _embed_one(
        self,
        client: Client,
        model: EmbeddingModel,
        tensors: Dict[str, np.ndarray],
        dimensions: Optional[int],
    ) -> Tuple[np.ndarray, Optional[int]]:
        answered: Dict[str, np.ndarray] = {}
        try:
            with closing(self.generate(client, model, tensors)) as pieces:
                for outputs in pieces:  # a decoupled model's last word stands
                    answered.update(outputs)
        except ApiError as e:
            if NOT_EMBEDDING in e.message:  # a vLLM model of another task says so
                raise ApiError(400, f"{e.message}: not an embedding model", param="model") from None
            raise
        try:
            return model.vector(answered, dimensions)
        except BadVector as e:
            raise ApiError(500, str(e)) from None


class Begun:
    """A generation whose first response (or its end) has come, so that what fails before
    it is known before the answer starts: iterating gives that response, then the rest as
    they come; ``close()`` cancels in the server what is unfinished."""

    def __init__(self, generation: Generator[Dict[str, np.ndarray], None, None]) -> None:
        self._rest = generation
        try:
            self._first = list(itertools.islice(generation, 1))
        except BaseException:
            generation.close()
            raise

    def __iter__(self) -> Iterator[Dict[str, np.ndarray]]:
        return itertools.chain(self._first, self._rest)

    def close(self) -> None:
        self._rest.close()


def _by_name(outputs: List[Tuple[str, str, np.ndarray]]) -> Dict[str, np.ndarray]:
    return {name: array for name, _, array in outputs}


def _live(client: Client) -> bool:
    try:
        return bool(
            client.client.is_server_live(headers=client.headers, client_timeout=client.timeout)
        )
    except Exception:  # noqa: BLE001 - whatever the client raises: not reachable
        return False


def _wire(data_type: str) -> str:
    """A config data type (TYPE_FP32, TYPE_STRING) as the protocol names it (FP32, BYTES)."""
    name = data_type.replace("TYPE_", "")
    return "BYTES" if name == "STRING" else name
