"""`pybackend backend-dir`: print the directory to pass as tritonserver's --backend-directory."""

from __future__ import annotations

import argparse
import sys

from pybackend.cli.command import add_command
from pybackend.server import locate


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "backend-dir",
        help="print the directory for tritonserver --backend-directory",
        description=(
            "Print the directory that holds python/libtriton_python.so, for "
            "`tritonserver --backend-directory $(pybackend backend-dir)`. "
            "Exits non-zero (after printing) if the library is missing."
        ),
        epilog=(
            "example:\n"
            "  tritonserver --model-repository models "
            '--backend-directory "$(pybackend backend-dir)"'
        ),
    )
    parser.add_argument(
        "--original",
        action="store_true",
        help="print a directory holding NVIDIA's original Python backend instead (for comparisons)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.original:
        print(locate.original_backend_dir())
        return 0
    backends = locate.our_backend_dir()
    print(backends)
    library = locate.our_backend_library()
    if not library.is_file():
        print(
            f"pybackend: {library} is missing; build it with `pip install -e .` in the checkout",
            file=sys.stderr,
        )
        return 1
    locate.record_interpreter()
    return 0
