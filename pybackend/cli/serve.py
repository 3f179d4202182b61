"""`pybackend serve`: run a model repository through a real tritonserver in the foreground."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import urllib.error
import urllib.request

from pybackend.cli.command import add_command, add_runtime_option, runtimes_of
from pybackend.server import ServerError, TritonServer
from pybackend.server.addresses import bare, local
from pybackend.server.processes import port_is_free

from .openai_endpoint import EndpointOptions, add_endpoint_options
from .stop_signals import stop_on_signals

#: tritonserver's customary ports; used when free so that familiar URLs work.
DEFAULT_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}

#: The request the README shows for examples/model_repository/add_sub.
ADD_SUB_REQUEST = {
    "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [10, 20, 30, 40]},
    ]
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "serve",
        help="serve a model repository with a real tritonserver",
        description=(
            "Serve MODEL_REPOSITORY through tritonserver (from the nvidia-pytriton wheel) "
            "with this package's Python backend, in the foreground until Ctrl-C. "
            "Arguments after a bare `--` are passed to tritonserver unchanged."
        ),
        epilog=(
            "examples:\n"
            "  pybackend serve examples/model_repository --http-port 8000\n"
            "  pybackend serve models -- --log-verbose=1   # after --: tritonserver's options"
        ),
    )
    parser.add_argument("model_repository", metavar="MODEL_REPOSITORY")
    parser.add_argument(
        "--backend",
        default="ours",
        help="'ours' (default), 'original' (NVIDIA's, for comparison) or a backends directory",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    for name, port in DEFAULT_PORTS.items():
        parser.add_argument(
            f"--{name}-port",
            type=int,
            default=None,
            help=f"{name} port (default {port} if free, else any free port; 0: any free port)",
        )
    parser.add_argument(
        "--backend-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="python backend setting, e.g. shm-default-byte-size=1048576 (repeatable)",
    )
    add_runtime_option(parser, "run")
    parser.add_argument("--model-control-mode", choices=("none", "poll", "explicit"))
    parser.add_argument("--load-model", action="append", default=[], metavar="NAME")
    parser.add_argument("--ready-timeout", type=float, default=120.0, metavar="SECONDS")
    parser.add_argument(
        "--follow-log", action="store_true", help="print the server log while serving"
    )
    parser.add_argument(
        "--openai-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also serve OpenAI's /v1/completions, /v1/chat/completions and /v1/embeddings "
        "for the text and embedding models on PORT (0: any free port; docs/openai.md)",
    )
    add_endpoint_options(parser)
    parser.add_argument(
        "--check",
        action="store_true",
        help="start, print the endpoints, send the example request, then stop (exit 1 if it fails)",
    )
    parser.set_defaults(run=run)


def _pick_port(requested: int | None, default: int, host: str) -> int | None:
    if requested is not None:
        return requested or None  # 0 means "any free port"
    return default if port_is_free(default, local(bare(host))) else None


def _http(url: str, body: dict | None = None) -> str:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def _models(server: TritonServer) -> list[dict]:
    try:
        return json.loads(_http(f"http://{server.http_url}/v2/repository/index", {}))
    except (OSError, ValueError):
        return []


def _example_request(server: TritonServer, models: list[dict]) -> tuple[str, str, dict | None]:
    """(description, curl command, JSON body or None for a GET) that works on this repository."""
    names = [m.get("name") for m in models]
    if "add_sub" in names:
        url = f"http://{server.http_url}/v2/models/add_sub/infer"
        body = json.dumps(ADD_SUB_REQUEST, separators=(",", ":"))
        curl = f"curl -s -X POST {url} -H 'Content-Type: application/json' -d {shlex.quote(body)}"
        return url, curl, ADD_SUB_REQUEST
    target = names[0] if names else None
    url = (
        f"http://{server.http_url}/v2/models/{target}/config"
        if target
        else (f"http://{server.http_url}/v2/health/ready")
    )
    return url, f"curl -s {url}", None


def _banner(server: TritonServer, models: list[dict]) -> None:
    print(f"pybackend: tritonserver is ready (backend {server.backend}: {server.backend_dir})")
    print(f"  HTTP     http://{server.http_url}")
    print(f"  gRPC     {server.grpc_url}")
    print(f"  metrics  {server.metrics_url}")
    for name, path in server.runtimes.items():
        print(f"  runtime  {name}: {path / 'model.py'}")
    for model in models:
        state = model.get("state") or "UNKNOWN"
        print(f"  model    {model.get('name')} (version {model.get('version', '-')}, {state})")


def _try_request(server: TritonServer, models: list[dict]) -> bool:
    url, curl, body = _example_request(server, models)
    print("Try it:")
    print(f"  {curl}")
    try:
        reply = _http(url, body)
    except (OSError, urllib.error.HTTPError) as exc:
        detail = (
            exc.read().decode(errors="replace") if isinstance(exc, urllib.error.HTTPError) else ""
        )
        print(f"  -> FAILED: {exc} {detail}".rstrip())
        return False
    print(f"  -> {reply}")
    return True


def run(args: argparse.Namespace) -> int:
    # Checked before tritonserver starts, which can take minutes: a bad option fails first.
    options = EndpointOptions.of(args) if args.openai_port is not None else None
    ports = {
        name: _pick_port(getattr(args, f"{name}_port"), default, args.host)
        for name, default in DEFAULT_PORTS.items()
    }
    try:
        server = TritonServer(
            args.model_repository,
            backend=args.backend,
            runtimes=runtimes_of(args.runtime),
            extra_args=args.passthrough,
            ready_timeout=args.ready_timeout,
            model_control_mode=args.model_control_mode,
            load_models=args.load_model,
            backend_config=args.backend_config,
            host=args.host,
            http_port=ports["http"],
            grpc_port=ports["grpc"],
            metrics_port=ports["metrics"],
            metrics_interval_ms=None,  # Triton's default: a deployment's metrics, not a test's
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"pybackend serve: {exc}", file=sys.stderr)
        return 2
    stop_on_signals()
    try:
        with server:
            models = _models(server)
            _banner(server, models)
            openai = None
            if options is not None:
                openai = options.endpoint(server.grpc_url, args.host, args.openai_port).start()
                print(f"  OpenAI   {openai.url} (docs/openai.md)")
            try:
                ok = _try_request(server, models)
                sys.stdout.flush()
                if args.check:
                    return 0 if ok else 1
                print("Serving; press Ctrl-C to stop.", flush=True)
                return _serve_forever(server, args.follow_log)
            finally:
                if openai is not None:
                    openai.close()
    except ServerError as exc:
        print(f"pybackend serve: {exc}", file=sys.stderr)
        print(
            f"pybackend serve: `pybackend validate {args.model_repository}` names what the "
            "server refuses in the repository, with the file and line of each",
            file=sys.stderr,
        )
        return 1
    except FileNotFoundError as exc:  # e.g. no tritonserver binary installed
        print(f"pybackend serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pybackend: stopped.", flush=True)
        return 0


def _serve_forever(server: TritonServer, follow_log: bool) -> int:
    shown = len(server.log_text())
    while server.is_alive():
        time.sleep(0.5)
        if follow_log:
            text = server.log_text()
            sys.stdout.write(text[shown:])
            sys.stdout.flush()
            shown = len(text)
    print(
        "pybackend: tritonserver exited unexpectedly.\n--- log tail ---\n"
        + "\n".join(server.log_text().splitlines()[-40:]),
        file=sys.stderr,
    )
    return 1
