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


def add_runtime_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--runtime NAME=DIR`` (repeatable): a python-based backend, by the name models'
    configs give it (docs/python_based_backends.md); ``what``: what the command does then."""
    parser.add_argument(
        "--runtime",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help=f'a python-based backend: models whose config says backend: "NAME" {what} '
        "DIR/model.py (repeatable; docs/python_based_backends.md)",
    )


def runtimes_of(given: list[str]) -> dict[str, str]:
    """``--runtime NAME=DIR`` values by name (ValueError: one that is not NAME=DIR)."""
    runtimes = {}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--runtime {item}: expected NAME=DIR, e.g. my_runtime=./my_runtime")
        runtimes[name] = path
    return runtimes
