"""The OpenAI-compatible HTTP endpoint: ``GET /v1/models``, ``POST /v1/completions`` and
``POST /v1/chat/completions`` (whole answers or server-sent event streams), ``POST
/v1/embeddings``, ``GET /health``, in front of a tritonserver's gRPC endpoint. A thread per
connection, a bounded number of them (listener.py); each completion is one Triton request,
each embedded text one."""

from __future__ import annotations

import hmac
import json
import select
import ssl
import sys
import threading
import time
import traceback
from contextlib import closing
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
)

from pybackend.cli.infer_client import Client
from pybackend.errors import PybackendError
from pybackend.server.addresses import bare, family, joined

from .answers import DONE, Answer, embeddings_answer, event, model_entry
from .chat import ChatTemplate
from .config_cache import CONFIG_TTL
from .convention import BadValue, NotATextModel, TextModel
from .embedding import EmbeddingModel, NotAnEmbeddingModel
from .listener import IDLE_SECONDS, MAX_BODY, MAX_CONNECTIONS, EndpointHandler, Listener
from .requests import ApiError, Ask, parse, parse_embeddings
from .upstream import Begun, Upstream

if TYPE_CHECKING:
    import numpy as np

Convention = TypeVar("Convention", TextModel, EmbeddingModel)


class OpenAIServer:
    """Serves on ``host:port`` (0: a free port, see :attr:`port`) until :meth:`close`, in
    front of tritonserver's gRPC endpoint ``triton_grpc_url``. ``api_key``: the Bearer key
    clients must send; ``timeout``: the longest wait for a model's next response;
    ``triton_headers``: gRPC metadata for every call to tritonserver (a restricted server's
    token: ``{"triton-grpc-protocol-<key>": value}`` for ``--grpc-restricted-protocol=
    ...:<key>=value``; under pybackend.pytriton, whose server restricts model-repository,
    ``{"triton-grpc-protocol-triton-access-token": triton.get_access_token()}``);
    ``config_ttl``: seconds a model's configuration is used before it is read again
    (config_cache.py); ``tls``: a server-side context (its certificate loaded): the endpoint
    then speaks HTTPS only; ``max_connections``: connections served at once, others are
    answered 503 with Retry-After (0: no bound; listener.py)."""

    def __init__(
        self,
        triton_grpc_url: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chat_template: Optional[ChatTemplate] = None,
        api_key: Optional[str] = None,
        timeout: float = 600.0,
        triton_headers: Optional[Mapping[str, str]] = None,
        config_ttl: float = CONFIG_TTL,
        tls: Optional[ssl.SSLContext] = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        try:
            import tritonclient.grpc  # noqa: F401 - the endpoint's client of tritonserver
        except ImportError as e:
            raise PybackendError(
                f"the OpenAI endpoint needs tritonclient's gRPC client: "
                f"pip install 'pybackend[openai]' ({e})"
            ) from None
        if max_connections < 0:
            raise ValueError(f"max_connections must be 0 (no bound) or more, got {max_connections}")
        self.upstream = Upstream(triton_grpc_url, timeout, triton_headers, config_ttl)
        self.chat_template = chat_template
        self.api_key = api_key
        self.created = int(time.time())
        self._host = host = bare(host)
        handler = type("Handler", (_Handler,), {"endpoint": self})
        settings = {"address_family": family(host), "tls": tls, "max_connections": max_connections}
        listener = type("Listener", (Listener,), settings)
        self._http = listener((host, port), handler)
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        scheme = "http" if self._http.tls is None else "https"
        return f"{scheme}://{joined(self._host, self.port)}/v1"

    def start(self) -> "OpenAIServer":
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="pybackend-openai", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._http.serve_forever()

    def close(self) -> None:
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._http.server_close()
        self.upstream.close()

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def text_model(self, config: Mapping[str, Any]) -> TextModel:
        return self._read(
            TextModel, config, "this endpoint serves models that follow the text convention"
        )

    def embedding_model(self, config: Mapping[str, Any]) -> EmbeddingModel:
        return self._read(
            EmbeddingModel,
            config,
            "/v1/embeddings serves models that follow an embedding convention",
        )

    def _read(
        self,
        kind: Callable[[Mapping[str, Any]], Convention],
        config: Mapping[str, Any],
        serves: str,
    ) -> Convention:
        """The model's configuration read for a convention; a model outside it is the
        request's fault (400), with what the model lacks."""
        try:
            return kind(config)
        except (NotATextModel, NotAnEmbeddingModel) as e:
            raise ApiError(400, f"{e}: {serves} (docs/openai.md)", param="model") from None

    def prompt_of(self, ask: Ask, model: TextModel) -> Optional[str]:
        """The ``text_input`` value, or None where the model takes ``messages`` alone."""
        if not ask.chat:
            if not model.takes_prompt:
                raise ApiError(
                    400,
                    f"model '{model.name}' takes a conversation ('messages'), not a prompt: "
                    "use /v1/chat/completions",
                    param="prompt",
                )
            return ask.prompt
        if model.chats_itself and not model.needs_prompt:
            return None
        if self.chat_template is None:
            raise ApiError(
                400,
                f"model '{model.name}' takes a prompt ('text_input') and no chat template was "
                "given: start the endpoint with --chat-template FILE (a Jinja chat template), "
                "or give the model an input 'messages' (TYPE_STRING) to get the conversation "
                "as JSON",
                param="messages",
            )
        try:
            return self.chat_template.render(ask.messages)
        except ValueError as e:
            raise ApiError(400, str(e), param="messages") from None


class _Handler(EndpointHandler):
    endpoint: OpenAIServer
    timeout = IDLE_SECONDS

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        self._answer(self._get)

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        self._answer(self._post)

    @property
    def route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def _answer(self, route: Callable[[], None]) -> None:
        self._started = False  # whether a streamed answer's headers went out
        self._body_read = self.command != "POST"
        try:
            self._check_key()
            route()
        except ApiError as e:
            self._json(e.status, e.body(), e.headers())
        except OSError:  # the client went away (a broken pipe, a reset, its silence)
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a fault of the endpoint: answered, and logged
            _log_fault(self.command, self.path)
            self.close_connection = True
            if not self._started:
                self._json(500, _fault(e).body())

    def _check_key(self) -> None:
        key = self.endpoint.api_key
        if key is None or self.route == "/health":
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise ApiError(
                401,
                "a valid API key is needed: Authorization: Bearer <key>",
                code="invalid_api_key",
            )

    def _get(self) -> None:
        path = self.route
        endpoint = self.endpoint
        if path == "/health":
            ready = endpoint.upstream.ready()
            self._json(200 if ready else 503, {"ready": ready})
            return
        if path == "/v1/models" or path.startswith("/v1/models/"):
            wanted = path[len("/v1/models/") :] if path != "/v1/models" else None
            with endpoint.upstream.client() as client:
                served = endpoint.upstream.ready_models(client)
                # One model asked for: only its configuration is read.
                asked = served if wanted is None else [n for n in served if n == wanted]
                names = [n for n in asked if _fits(endpoint, client, n)]
            entries = [model_entry(n, endpoint.created) for n in names]
            if wanted is None:
                self._json(200, {"object": "list", "data": entries})
                return
            if entries:
                self._json(200, entries[0])
                return
            raise ApiError(
                404,
                f"The model `{wanted}` does not exist",
                param="model",
                code="model_not_found",
            )
        raise ApiError(404, f"no route {self.path} (GET)")

    def _post(self) -> None:
        path = self.route
        if path == "/v1/embeddings":
            self._embeddings()
            return
        if path not in ("/v1/completions", "/v1/chat/completions"):
            raise ApiError(404, f"no route {self.path} (POST)")
        ask = parse(self._body(), chat=path == "/v1/chat/completions")
        endpoint = self.endpoint
        upstream = endpoint.upstream

        def start(config: Mapping[str, Any]) -> Tuple[TextModel, Begun]:
            """The model and its generation, whose first response has come: a failure before
            it is a plain answer (and one on a kept configuration since reloaded, tried
            again)."""
            model = endpoint.text_model(config)
            prompt = endpoint.prompt_of(ask, model)
            try:
                tensors = model.tensors(
                    prompt, ask.messages if ask.chat else None, ask.sampling, ask.stream
                )
            except BadValue as e:
                raise ApiError(400, str(e), param=e.param) from None
            return model, Begun(upstream.generate(client, model, tensors, self._check_client))

        answer = Answer(chat=ask.chat, model=ask.model)
        with upstream.client() as client:
            model, generation = upstream.with_config(ask.model, start, client)
            # Closed on every path before the client: an unfinished generation is then
            # cancelled in the server, never waited for.
            with closing(generation):
                if ask.stream:
                    self._stream(ask, model, iter(generation), answer)
                else:
                    for outputs in generation:
                        answer.add(model.piece(outputs))
                    self._json(200, answer.whole())

    def _embeddings(self) -> None:
        ask = parse_embeddings(self._body())
        upstream = self.endpoint.upstream

        def embed(config: Mapping[str, Any]) -> Tuple[List[np.ndarray], int]:
            try:
                return upstream.embed(
                    self.endpoint.embedding_model(config), ask.texts, ask.dimensions
                )
            except BadValue as e:
                raise ApiError(400, str(e), param=e.param) from None

        vectors, tokens = upstream.with_config(ask.model, embed)  # each lane leases a client
        self._json(200, embeddings_answer(ask.model, vectors, tokens, ask.base64))

    def _stream(
        self, ask: Ask, model: TextModel, pieces: Iterator[Dict[str, Any]], answer: Answer
    ) -> None:
        """Server-sent events: each piece as it comes; an error after the stream began is
        an event with OpenAI's error body, then the end. A client that goes away ends the
        request in the server (``_check_client``; the caller closes ``pieces``)."""
        first = next(pieces, None)  # come already: errors before it were plain answers
        self._started = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            if ask.chat:
                self._send(event(answer.chunk(None)))
            outputs = first
            while outputs is not None:
                piece = model.piece(outputs)
                answer.add(piece)
                if piece.text:
                    self._send(event(answer.chunk(piece.text)))
                outputs = next(pieces, None)
            self._send(
                event(answer.chunk(None if ask.chat else "", answer.finish_reason or "stop"))
            )
            if ask.include_usage and answer.usage is not None:
                self._send(event(answer.usage_chunk()))
        except ApiError as e:
            self._send(event(e.body()))
        except OSError:
            raise  # the client is gone: nothing more to send
        except Exception as e:  # noqa: BLE001 - a fault mid-stream: said, never a cut answer
            _log_fault(self.command, self.path)
            self._send(event(_fault(e).body()))
        self._send(DONE)

    def _check_client(self) -> None:
        """Raises once the client has closed its connection, so that a generation nobody
        will read is cancelled while it waits for its model (a whole answer's only
        response may be minutes away). Gone: the client's end of the stream has come (its
        FIN: POLLRDHUP, seen without reading, which under TLS could not peek; also behind
        bytes not read yet, a TLS close_notify say) or the connection broke. A client that
        shut down only its sending side counts as gone; HTTP clients do not do that."""
        poller = select.poll()  # not select.select: it refuses descriptors past 1023
        poller.register(self.connection, select.POLLRDHUP)
        ended = select.POLLRDHUP | select.POLLHUP | select.POLLERR
        if any(mask & ended for _, mask in poller.poll(0)):
            raise ConnectionAbortedError("the client closed its connection")

    def _send(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise ApiError(411, "send the body with a Content-Length (not chunked)")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
        if length < 0:
            raise ApiError(400, "Content-Length is negative")
        if length > MAX_BODY:
            raise ApiError(413, f"the request body is larger than {MAX_BODY} bytes")
        body = self.rfile.read(length)
        self._body_read = True
        return body

    def _json(
        self, status: int, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None
    ) -> None:
        data = json.dumps(body, allow_nan=False).encode()  # strict JSON: no bare NaN
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if not self._body_read:
            # A body left unread would be taken for the next request on this connection.
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)


def _fits(endpoint: OpenAIServer, client: Client, name: str) -> bool:
    """Whether the model serves text or embeddings (its configuration, kept or read)."""
    try:
        config = endpoint.upstream.config(client, name).config
    except ApiError:
        return False  # gone since the index was read
    for kind in (TextModel, EmbeddingModel):
        try:
            kind(config)
            return True
        except ValueError:
            continue
    return False


def _fault(error: Exception) -> ApiError:
    return ApiError(500, f"the endpoint failed: {type(error).__name__}: {error}")


def _log_fault(command: str, path: str) -> None:
    print(f"pybackend openai: {command} {path} failed:", file=sys.stderr)
    traceback.print_exc()
