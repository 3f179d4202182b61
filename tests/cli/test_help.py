"""Every command's --help ends with an example of its use, and the top-level help lists
the exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from pybackend.cli.main import build_parser

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`

COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def test_every_command_is_there() -> None:
    assert COMMANDS == sorted(
        [
            "backend-dir",
            "serve",
            "check-env",
            "devserve",
            "new",
            "validate",
            "config",
            "infer",
            "openai",
        ]
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_an_example(cli: Cli, command: str) -> None:
    done = cli(command, "--help")
    assert done.returncode == 0, done.stderr
    tail = done.stdout.split("\nexample", 1)
    assert len(tail) == 2, done.stdout
    assert "pybackend" in tail[1] or "backend-dir" in tail[1]


def test_top_level_help_lists_the_exit_codes(cli: Cli) -> None:
    done = cli("--help")
    assert (
        "exit codes: 0 success; 1 the command failed (validate: errors found); 2 bad command line."
        in done.stdout
    )
