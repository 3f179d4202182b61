"""`pybackend openai`: an OpenAI-compatible endpoint in front of a running tritonserver
(docs/openai.md); the same options as `pybackend serve --openai-port`."""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from pybackend.cli.command import add_command
from pybackend.errors import PybackendError

from .stop_signals import stop_on_signals, wait_for_stop

if TYPE_CHECKING:  # the endpoint's package is imported only when one is started
    from pybackend.openai_api import ChatTemplate, OpenAIServer


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "openai",
        help="serve OpenAI's completions, chat and embeddings in front of tritonserver",
        description=(
            "An OpenAI-compatible HTTP endpoint for the text models a running tritonserver "
            "serves (any backend): models with input 'text_input' and output 'text_output' "
            "(the vLLM backend's convention, docs/openai.md); decoupled models stream. "
            "/v1/embeddings for embedding models ('text_input' -> 'embedding', or the vLLM "
            "backend's embedding task). "
            "In the foreground until Ctrl-C."
        ),
        epilog=(
            "examples:\n"
            "  pybackend openai --triton grpc://127.0.0.1:8001 --port 9000\n"
            "  pybackend openai --triton 127.0.0.1:8001 --chat-template chat.jinja\n"
            "  pybackend serve models --openai-port 9000   # starts tritonserver too"
        ),
    )
    parser.add_argument(
        "--triton",
        default="127.0.0.1:8001",
        metavar="HOST:PORT",
        help="tritonserver's gRPC endpoint (default 127.0.0.1:8001)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=9000, help="port (default 9000; 0: any free)")
    add_endpoint_options(parser)
    parser.set_defaults(run=run)


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    """The options `pybackend openai` and `pybackend serve --openai-port` share."""
    parser.add_argument(
        "--chat-template",
        metavar="FILE",
        help="a Jinja chat template that renders a conversation as a model's prompt "
        "(for models without a 'messages' input)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VARIABLE",
        help="require 'Authorization: Bearer <key>', the key read from this environment "
        "variable (not given on the command line, where `ps` shows it)",
    )
    parser.add_argument(
        "--triton-header-env",
        action="append",
        default=[],
        metavar="NAME=VARIABLE",
        help="send gRPC metadata NAME to tritonserver with every call, its value read from "
        "the environment variable VARIABLE: a restricted server's token "
        "(--grpc-restricted-protocol=...:KEY=VALUE wants NAME triton-grpc-protocol-KEY); "
        "repeatable",
    )
    parser.add_argument(
        "--openai-timeout",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="longest wait for a model's next response (default 600)",
    )
    parser.add_argument(
        "--openai-tls-cert",
        metavar="FILE",
        help="serve HTTPS with this certificate (PEM; its chain after it, and its private key "
        "too unless --openai-tls-key names another file)",
    )
    parser.add_argument(
        "--openai-tls-key", metavar="FILE", help="the certificate's private key (PEM)"
    )
    parser.add_argument(
        "--openai-config-ttl",
        type=_seconds_or_zero,
        metavar="SECONDS",
        # The default is the endpoint's (config_cache.CONFIG_TTL): not imported here, the
        # command line starts without numpy and the endpoint's package.
        help="how long a model's configuration read from tritonserver is used before it is "
        "read again (default 5; 0 reads it for every request). A request that fails on a "
        "kept configuration a reload has changed since runs again with the new one",
    )
    parser.add_argument(
        "--openai-max-connections",
        type=_count,
        metavar="N",
        # The default is the endpoint's (listener.MAX_CONNECTIONS), as for the TTL above.
        help="connections served at once (default 1024; 0: no bound); a connection past "
        "them is answered 503 with Retry-After: 1, which OpenAI's SDKs retry",
    )


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: give a number of seconds above 0")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: give a whole number, 0 or more")
    return value


def _seconds_or_zero(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text}: give a number of seconds, 0 or more")
    return value


@dataclass
class EndpointOptions:
    """The options read and checked (before tritonserver starts, so a bad one fails fast)."""

    chat_template: Optional["ChatTemplate"]
    api_key: Optional[str]
    timeout: float
    triton_headers: Dict[str, str]
    config_ttl: Optional[float] = None  # None: the endpoint's default
    tls: Optional[ssl.SSLContext] = None
    max_connections: Optional[int] = None  # None: the endpoint's default

    @classmethod
    def of(cls, args: argparse.Namespace) -> "EndpointOptions":
        """PybackendError for a bad option."""
        from pybackend.openai_api import ChatTemplate

        key = None
        if args.api_key_env:
            key = os.environ.get(args.api_key_env)
            if not key:
                raise PybackendError(f"--api-key-env {args.api_key_env}: the variable is not set")
        template = ChatTemplate.from_file(args.chat_template) if args.chat_template else None
        return cls(
            template,
            key,
            args.openai_timeout,
            _headers(args.triton_header_env),
            args.openai_config_ttl,
            _tls(args.openai_tls_cert, args.openai_tls_key),
            args.openai_max_connections,
        )

    def endpoint(self, triton_grpc: str, host: str, port: int) -> "OpenAIServer":
        """The endpoint (not started); PybackendError when it cannot listen."""
        from pybackend.openai_api import OpenAIServer

        given: Dict[str, Any] = {}  # an option not given keeps the endpoint's default
        if self.config_ttl is not None:
            given["config_ttl"] = self.config_ttl
        if self.max_connections is not None:
            given["max_connections"] = self.max_connections
        try:
            return OpenAIServer(
                triton_grpc,
                host=host,
                port=port,
                chat_template=self.chat_template,
                api_key=self.api_key,
                timeout=self.timeout,
                triton_headers=self.triton_headers,
                tls=self.tls,
                **given,
            )
        except OSError as e:
            raise PybackendError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


class _Encrypted(Exception):
    pass


def _no_passphrase() -> bytes:
    raise _Encrypted


def _tls(cert: Optional[str], key: Optional[str]) -> Optional[ssl.SSLContext]:
    """The server's TLS context, its certificate and key loaded (PybackendError naming the
    file and what is wrong); None without --openai-tls-cert."""
    if cert is None:
        if key is not None:
            raise PybackendError(f"--openai-tls-key {key}: give --openai-tls-cert FILE with it")
        return None
    given = f"--openai-tls-cert {cert}" + (f" --openai-tls-key {key}" if key else "")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # OpenSSL would ask for an encrypted key's passphrase on the terminal.
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except _Encrypted:
        raise PybackendError(
            f"{given}: the private key is encrypted: give it unencrypted, readable by this "
            "user only (openssl pkey -in KEY -out KEY.plain)"
        ) from None
    except ssl.SSLError as e:
        raise PybackendError(
            f"{given}: not a PEM certificate with its private key ({e.reason or e}); a key in "
            "a file of its own goes with --openai-tls-key"
        ) from None
    except OSError as e:
        raise PybackendError(f"{given}: {e.strerror or e}: {e.filename or cert}") from None
    return context


def _headers(given: List[str]) -> Dict[str, str]:
    """NAME=VARIABLE pairs as NAME -> the variable's value (values stay out of `ps`)."""
    headers = {}
    for pair in given:
        name, _, variable = pair.partition("=")
        if not name or not variable:
            raise PybackendError(f"--triton-header-env {pair}: give NAME=VARIABLE")
        value = os.environ.get(variable)
        if not value:
            raise PybackendError(f"--triton-header-env {pair}: the variable is not set")
        headers[name.lower()] = value  # gRPC metadata names are lower case
    return headers


def run(args: argparse.Namespace) -> int:
    server = EndpointOptions.of(args).endpoint(args.triton, args.host, args.port)
    stop_on_signals()
    where = server.upstream.where.address
    print(f"pybackend: OpenAI endpoint {server.url} in front of grpc://{where}", flush=True)
    print(
        f"  curl -s {server.url}/models   # the text models it serves",
        flush=True,
    )
    try:
        server.start()
        wait_for_stop()
    except KeyboardInterrupt:
        print("pybackend: stopped.", flush=True)
    finally:
        server.close()
    sys.stdout.flush()
    return 0
