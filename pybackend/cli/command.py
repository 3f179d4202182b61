"""How a command joins `pybackend`: its help line, description and examples, the examples
shown as written (every command has some; tests/cli/test_help.py holds them to it)."""

from __future__ import annotations

import argparse


def add_command(
    commands: argparse._SubParsersAction, name: str, *, help: str, description: str, epilog: str
) -> argparse.ArgumentParser:  # noqa: A002 - argparse's own keyword
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser
