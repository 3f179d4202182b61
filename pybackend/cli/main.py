"""Entry point of the `pybackend` command: argument parsing and dispatch to subcommands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pybackend import __version__
from pybackend.cli import backend_dir, check_env, devserve, serve


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pybackend",
        description="A drop-in replacement for Triton Inference Server's Python backend.",
    )
    parser.add_argument("--version", action="version", version=f"pybackend {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    backend_dir.add_parser(commands)
    serve.add_parser(commands)
    check_env.add_parser(commands)
    devserve.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare "--" goes to tritonserver untouched (serve only).
    passthrough: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, passthrough = args_list[:cut], args_list[cut + 1 :]
    args = build_parser().parse_args(args_list)
    args.passthrough = passthrough
    return int(args.run(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
