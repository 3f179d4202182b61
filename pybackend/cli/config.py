"""`pybackend config DIR`: write into config.pbtxt what the model's
``auto_complete_config`` declares, so that inputs and outputs declared in Python are in the
file too (for clients, reviews and tools that read it)."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from pybackend.cli.command import add_command

EXAMPLE = """\
examples:
  pybackend config models/classifier --dry-run   # print the new config.pbtxt
  pybackend config models/classifier --diff      # show what would change
  pybackend config models/classifier             # write it (the old file: config.pbtxt.bak)
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "config",
        help="write into config.pbtxt what the model's auto_complete_config declares",
        description=(
            "Import DIR's model.py (without creating the model), run its "
            "auto_complete_config on the configuration config.pbtxt holds, as tritonserver "
            "does at load, and write the result to config.pbtxt: the file's settings, with "
            "what the server takes over from auto_complete_config (max_batch_size, inputs, "
            "outputs, a scheduler where the file has none, decoupled). Comments other than "
            "the file's leading ones are not kept."
        ),
        epilog=EXAMPLE,
    )
    parser.add_argument("directory", metavar="DIR", help="the model directory")
    parser.add_argument("--dry-run", action="store_true", help="print the file, write nothing")
    parser.add_argument("--diff", action="store_true", help="print a diff, write nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    file = directory / "config.pbtxt"
    from pybackend.validate.completion import rewrite  # here: only this command needs it

    done = rewrite(directory)
    if args.dry_run:
        print(done.new, end="")
        return 0
    if args.diff:
        old, new = done.old.splitlines(True), done.new.splitlines(True)
        print(
            "".join(difflib.unified_diff(old, new, f"{file} (now)", f"{file} (completed)")), end=""
        )
        return 0
    if not done.completes:
        print(f"{file}: unchanged, the model has no auto_complete_config")
        return 0
    if not done.changed:
        print(f"{file}: unchanged, it already says what auto_complete_config declares")
        return 0
    if file.exists():
        backup = file.with_name("config.pbtxt.bak")
        backup.write_text(done.old)
        print(f"saved the old file as {backup}")
    file.write_text(done.new)
    print(f"wrote {file}")
    return 0
