"""The OpenAI endpoint's listening socket: a thread per connection (the standard library's
threading HTTP server), HTTPS wrapped on each connection's own thread, and a bound on the
connections served at once.

Past the bound a connection is not served but answered, on a thread of its own: its request
read, the body dropped a piece at a time, all within REFUSAL_SECONDS (a response written
before would reach a client that is still sending as a reset, not as an answer), then
answered 503 with ``Retry-After: 1``, which OpenAI's SDKs retry by themselves. Past a
second, small bound on those answers, a connection is closed at once: threads stay bounded
whatever the clients do."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Tuple

from .requests import ApiError

#: Largest request body read (a conversation is text; this bounds a client's memory use).
MAX_BODY = 16 * 1024 * 1024
#: Seconds a connection may stay silent (a slow or stalled client, an idle keep-alive)
#: before its thread lets it go.
IDLE_SECONDS = 120
#: Connections served at once unless the endpoint is told otherwise (0: no bound).
MAX_CONNECTIONS = 1024
#: Connections past the bound answered 503 at once; past these, closed unanswered.
REFUSALS_AT_ONCE = 64
#: Seconds a connection past the bound has to send its request.
REFUSAL_SECONDS = 10


class Listener(ThreadingHTTPServer):
    """The standard library's threading HTTP server; with ``tls``, each connection is
    wrapped as it is accepted and its handshake runs on the connection's own thread (bounded
    by IDLE_SECONDS), so that a slow or silent client holds up no other. At most
    ``max_connections`` connections are served at once (module docstring)."""

    daemon_threads = True
    tls: Optional[ssl.SSLContext] = None
    max_connections = MAX_CONNECTIONS
    refusals_at_once = REFUSALS_AT_ONCE

    def __init__(self, address: Tuple[str, int], handler: Any) -> None:
        self._counts = threading.Lock()
        self.serving = 0  # connections on a thread of their own, served
        self.refusing = 0  # connections past the bound being answered 503
        self.refused = 0  # connections past the bound so far, answered or closed
        super().__init__(address, handler)

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:
            # "::" takes IPv4 clients too, whatever the host's net.ipv6.bindv6only says (as
            # the standard library's DualStackServer does).
            with contextlib.suppress(OSError):
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def get_request(self) -> Tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.tls is None:
            return sock, address
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def process_request(self, request: Any, client_address: Any) -> None:
        """Each connection on a thread of its own: served, or answered 503 past the bound."""
        with self._counts:
            if not self.max_connections or self.serving < self.max_connections:
                self.serving += 1
                refused = False
            else:
                self.refused += 1
                if self.refusing >= self.refusals_at_once:
                    self.shutdown_request(request)
                    return
                self.refusing += 1
                refused = True
        thread = threading.Thread(
            target=self._connection, args=(request, client_address, refused), daemon=True
        )
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: the client may try again
            self._release(refused)
            self.shutdown_request(request)

    def _connection(self, request: Any, client_address: Any, refused: bool) -> None:
        try:
            if self._handshake(request, REFUSAL_SECONDS if refused else IDLE_SECONDS):
                handler: Any = _Refusal if refused else self.RequestHandlerClass
                handler(request, client_address, self)
        except Exception:  # noqa: BLE001 - as socketserver's own thread: said, then closed
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._release(refused)

    def _handshake(self, request: Any, timeout: float) -> bool:
        """Whether the connection can be read: TLS's handshake done where it is HTTPS."""
        if self.tls is None:
            return True
        request.settimeout(timeout)
        try:
            request.do_handshake()
        except (OSError, ValueError):  # ssl.SSLError among them: plain HTTP, a client gone
            return False
        return True

    def _release(self, refused: bool) -> None:
        with self._counts:
            if refused:
                self.refusing -= 1
            else:
                self.serving -= 1


class EndpointHandler(BaseHTTPRequestHandler):
    """What every connection of the endpoint speaks: HTTP/1.1, no access log (tritonserver's
    log says what ran)."""

    protocol_version = "HTTP/1.1"
    server_version = "pybackend-openai"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass


class _Refusal(EndpointHandler):
    """A connection past the bound: its requests read and answered 503, then it is closed."""

    server: Listener
    timeout = REFUSAL_SECONDS

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        self._refuse()

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        self._refuse()

    def _refuse(self) -> None:
        try:
            self._drain_body()
        except OSError:  # too slow, or gone: closed without an answer
            self.close_connection = True
            return
        bound = self.server.max_connections
        error = ApiError(
            503,
            f"the endpoint serves at most {bound} connections at once and all are taken: "
            "retry shortly (its operator sets the bound with --openai-max-connections)",
            code="too_many_connections",
        )
        data = json.dumps(error.body()).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Retry-After", "1")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _drain_body(self) -> None:
        """Reads the request's body and drops it, a piece at a time (64 such connections
        must not hold their bodies), within REFUSAL_SECONDS in all."""
        try:
            left = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            left = 0
        if not 0 < left <= MAX_BODY:
            return  # nothing to read, or more than would be served: answered, then closed
        deadline = time.monotonic() + REFUSAL_SECONDS
        while left > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the body took too long")
            self.connection.settimeout(remaining)
            piece = self.rfile.read1(min(left, 64 * 1024))
            if not piece:
                raise ConnectionResetError("the client went away")
            left -= len(piece)
