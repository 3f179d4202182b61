"""The OpenAI-compatible HTTP endpoint: ``GET /v1/models``, ``POST /v1/completions`` and
``POST /v1/chat/completions`` (whole answers or server-sent event streams), ``GET /health``,
in front of a tritonserver's gRPC endpoint. A thread per connection (stdlib HTTP server);
each request is one Triton request."""

from __future__ import annotations

import hmac
import json
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Optional

from pybackend.errors import PybackendError

from .answers import DONE, Answer, event, model_entry
from .chat import ChatTemplate
from .convention import NotATextModel, TextModel
from .requests import ApiError, Ask, parse
from .upstream import Upstream

#: Largest request body read (a conversation is text; this bounds a client's memory use).
MAX_BODY = 16 * 1024 * 1024


class OpenAIServer:
    """Serves on ``host:port`` (0: a free port, see :attr:`port`) until :meth:`close`."""

    def __init__(
        self,
        triton_grpc_url: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chat_template: Optional[ChatTemplate] = None,
        api_key: Optional[str] = None,
        timeout: float = 600.0,
    ) -> None:
        try:
            import tritonclient.grpc  # noqa: F401 - the endpoint's client of tritonserver
        except ImportError as e:
            raise PybackendError(
                f"the OpenAI endpoint needs tritonclient's gRPC client: "
                f"pip install 'pybackend[openai]' ({e})"
            ) from None
        self.upstream = Upstream(triton_grpc_url, timeout)
        self.chat_template = chat_template
        self.api_key = api_key
        self.created = int(time.time())
        self._host = host
        handler = type("Handler", (_Handler,), {"endpoint": self})
        self._http = ThreadingHTTPServer((host, port), handler)
        self._http.daemon_threads = True
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

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

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def text_model(self, client: Any, name: str) -> TextModel:
        try:
            return TextModel(self.upstream.config(client, name))
        except NotATextModel as e:
            raise ApiError(
                400,
                f"{e}: this endpoint serves models that follow the text convention "
                "(docs/openai.md)",
                param="model",
            ) from None

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


class _Handler(BaseHTTPRequestHandler):
    endpoint: OpenAIServer
    protocol_version = "HTTP/1.1"
    server_version = "pybackend-openai"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass  # the access log is not printed: tritonserver's log says what ran

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        self._answer(self._get)

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        self._answer(self._post)

    def _answer(self, route: Any) -> None:
        self._started = False  # whether a streamed answer's headers went out
        try:
            self._check_key()
            route()
        except ApiError as e:
            self._json(e.status, e.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a fault of the endpoint: answered, and logged
            print(f"pybackend openai: {self.command} {self.path} failed:", file=sys.stderr)
            traceback.print_exc()
            self.close_connection = True
            if not self._started:
                failure = ApiError(500, f"the endpoint failed: {type(e).__name__}: {e}")
                self._json(500, failure.body())

    def _check_key(self) -> None:
        key = self.endpoint.api_key
        if key is None or self.path == "/health":
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise ApiError(401, "a valid API key is needed: Authorization: Bearer <key>")

    def _get(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        endpoint = self.endpoint
        if path == "/health":
            client = endpoint.upstream.client()
            try:
                ready = client.client.is_server_ready()
            except Exception:  # noqa: BLE001 - unreachable or failing: not healthy
                ready = False
            finally:
                client.close()
            self._json(200 if ready else 503, {"ready": bool(ready)})
            return
        if path == "/v1/models" or path.startswith("/v1/models/"):
            client = endpoint.upstream.client()
            try:
                names = [
                    n for n in endpoint.upstream.ready_models(client) if _fits(endpoint, client, n)
                ]
            finally:
                client.close()
            entries = [model_entry(n, endpoint.created) for n in names]
            if path == "/v1/models":
                self._json(200, {"object": "list", "data": entries})
                return
            wanted = path[len("/v1/models/") :]
            for entry in entries:
                if entry["id"] == wanted:
                    self._json(200, entry)
                    return
            raise ApiError(404, f"The model `{wanted}` does not exist", param="model")
        raise ApiError(404, f"no route {self.path} (GET)")

    def _post(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/v1/completions", "/v1/chat/completions"):
            raise ApiError(404, f"no route {self.path} (POST)")
        ask = parse(self._body(), chat=path == "/v1/chat/completions")
        endpoint = self.endpoint
        client = endpoint.upstream.client()
        try:
            model = endpoint.text_model(client, ask.model)
            prompt = endpoint.prompt_of(ask, model)
            tensors = model.tensors(
                prompt, ask.messages if ask.chat else None, ask.sampling, ask.stream
            )
            pieces = endpoint.upstream.generate(client, model, tensors)
            answer = Answer(chat=ask.chat, model=ask.model)
            if ask.stream:
                self._stream(ask, model, pieces, answer)
            else:
                for outputs in pieces:
                    answer.add(model.piece(outputs))
                self._json(200, answer.whole())
        finally:
            client.close()

    def _stream(self, ask: Ask, model: TextModel, pieces: Any, answer: Answer) -> None:
        """Server-sent events: each piece as it comes; an error after the stream began is
        an event with OpenAI's error body, then the end. A client that goes away closes
        ``pieces``, which cancels the request in the server."""
        first = next(pieces, None)  # errors before any event are plain error answers
        self._started = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
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
            if ask.include_usage:
                self._send(event(answer.usage_chunk()))
        except ApiError as e:
            self._send(event(e.body()))
        finally:
            pieces.close()
        self._send(DONE)

    def _send(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def _body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
        if length > MAX_BODY:
            raise ApiError(413, f"the request body is larger than {MAX_BODY} bytes")
        return self.rfile.read(length)

    def _json(self, status: int, body: Dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _fits(endpoint: OpenAIServer, client: Any, name: str) -> bool:
    try:
        endpoint.text_model(client, name)
    except ApiError:
        return False
    return True
