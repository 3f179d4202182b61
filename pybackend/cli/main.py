"""Entry point of the `pybackend` command: argument parsing and dispatch to subcommands.

Exit codes (every command): 0 success, 1 the command ran and failed (a check found
errors, a request failed, a file could not be written), 2 the command line is wrong
(argparse's usage error). A pybackend error (:class:`pybackend.errors.PybackendError`)
anywhere below a command is reported as one line, ``pybackend COMMAND: message``, with
exit code 1; other exceptions are bugs and keep their traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pybackend import __version__
from pybackend.cli import (
    backend_dir,
    check_env,
    config,
    devserve,
    infer,
    new,
    openai_endpoint,
    serve,
    validate,
)
from pybackend.errors import PybackendError

EPILOG = """\
exit codes: 0 success; 1 the command failed (validate: errors found); 2 bad command line.
`pybackend COMMAND --help` shows a command's options and an example."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pybackend",
        description="A drop-in replacement for Triton Inference Server's Python backend.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pybackend {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    backend_dir.add_parser(commands)
    serve.add_parser(commands)
    check_env.add_parser(commands)
    devserve.add_parser(commands)
    new.add_parser(commands)
    validate.add_parser(commands)
    config.add_parser(commands)
    infer.add_parser(commands)
    openai_endpoint.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare "--" goes to tritonserver untouched (serve only).
    passthrough: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, passthrough = args_list[:cut], args_list[cut + 1 :]
    parser = build_parser()
    args, extra = parser.parse_known_args(args_list)
    # argparse does not give a positional list the words after an option
    # (`infer URL MODEL --stream A=1`): a command that takes NAME=VALUE words gets them here.
    if extra and hasattr(args, "inputs") and all("=" in w and not w.startswith("-") for w in extra):
        args.inputs += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.passthrough = passthrough
    try:
        return int(args.run(args) or 0)
    except PybackendError as e:
        print(f"pybackend {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
