"""`pybackend devserve MODEL_REPOSITORY`: the development server (UV-42), tritonserver's HTTP
and gRPC endpoints for a repository's Python models without tritonserver, in this
environment; `--in-process` runs model.py here so that `breakpoint()` stops in this terminal."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from pybackend.cli.command import add_command

from .stop_signals import stop_on_signals


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "devserve",
        help="serve a model repository's Python models without tritonserver (development)",
        description=(
            "Serve the Python models of MODEL_REPOSITORY on tritonserver's HTTP/REST and gRPC "
            "protocols from this Python environment, without a tritonserver binary: "
            "tritonclient and curl talk to it as to tritonserver. The instances each "
            "model's instance_group asks for, a metrics endpoint (--metrics-port): for "
            "development (`pybackend serve` runs a real tritonserver)."
        ),
        epilog="example:\n  pybackend devserve examples/model_repository --in-process --reload",
    )
    parser.add_argument("model_repository", metavar="MODEL_REPOSITORY")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--http-port", type=int, default=8000, help="HTTP port (default 8000; 0: any free port)"
    )
    parser.add_argument(
        "--grpc-port",
        type=int,
        default=8001,
        help="gRPC port (default 8001; 0: any free port; -1: no gRPC endpoint)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8002,
        help="port of /metrics, the models' custom metrics (default 8002; 0: any free port; "
        "-1: none)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run model.py in this process (breakpoint() works) instead of stub processes",
    )
    parser.add_argument(
        "--reload",
        action="store_true",
        help="load a model again when a file in its directory changes",
    )
    parser.add_argument(
        "--log-verbose",
        type=int,
        default=0,
        metavar="LEVEL",
        help="as tritonserver's: from 1 the models' VERBOSE log records are shown too "
        "(default 0; clients change it with update_log_settings)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: `pybackend backend-dir` must work where only the library is installed.
    from pybackend.devserver import serve

    grpc_port = None if args.grpc_port < 0 else args.grpc_port
    if grpc_port is not None and importlib.util.find_spec("grpc") is None:
        print(
            "pybackend devserve: no grpcio here, serving HTTP only "
            "(pip install 'tritonclient[grpc]' for the gRPC endpoint)",
            file=sys.stderr,
        )
        grpc_port = None
    stop_on_signals()
    try:
        serve(
            args.model_repository,
            host=args.host,
            http_port=args.http_port,
            grpc_port=grpc_port,
            metrics_port=None if args.metrics_port < 0 else args.metrics_port,
            in_process=args.in_process,
            reload=args.reload,
            log_verbose=max(0, args.log_verbose),
        )
    except (FileNotFoundError, OSError) as e:
        print(f"pybackend devserve: {e}", file=sys.stderr)
        return 1
    return 0
