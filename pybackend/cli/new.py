"""`pybackend new DIR`: a model directory to start from, config.pbtxt, ``1/model.py`` and
a pytest file whose tests pass as generated (templates in :mod:`.templates`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pybackend.cli.command import add_command

from .template_tests import generated_test
from .templates import TEMPLATES, Model, config_pbtxt, model_py
from .tensor_specs import SpecError, parse_specs

EXAMPLE = """\
templates:
{templates}

examples:
  pybackend new models/resize --input IMAGE:UINT8:-1,-1,3 --output IMAGE_OUT:UINT8:-1,-1,3
  pybackend new models/tokens --template decoupled --input PROMPT:STRING --output TOKEN:STRING
  cd models/tokens && pytest -q        # the generated test passes as generated
"""

DEFAULTS = {  # template -> (inputs, outputs, dims), when --input/--output are not given
    "basic": (["INPUT0:FP32"], ["OUTPUT0:FP32"], [-1]),
    "batched": (["INPUT0:FP32"], ["OUTPUT0:FP32"], [4]),
    "decoupled": (["INPUT0:FP32"], ["OUTPUT0:FP32"], [-1]),
    # The names and types of examples/model_repository/add_sub, the default target.
    "bls": (["INPUT0:FP32", "INPUT1:FP32"], ["OUTPUT0:FP32", "OUTPUT1:FP32"], [4]),
    "sequence": (["INPUT0:FP32"], ["OUTPUT0:FP32"], [-1]),
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    listed = "\n".join(f"  {name:10} {what}" for name, what in TEMPLATES.items())
    parser = add_command(
        commands,
        "new",
        help="create a model directory (config.pbtxt, 1/model.py, a passing test)",
        description=(
            "Create DIR as a Python model: config.pbtxt, 1/model.py and test_NAME.py, a "
            "pytest file using pybackend.testing that passes as generated. The model "
            "computes output k as input k (mod the number of inputs) converted to the "
            "output's data type: replace that with your computation."
        ),
        epilog=EXAMPLE.format(templates=listed),
    )
    parser.add_argument("directory", metavar="DIR", help="the model directory to create")
    parser.add_argument("--template", "-t", choices=list(TEMPLATES), default="basic")
    parser.add_argument("--name", help="the model name (default: the last part of DIR)")
    spec_help = (
        "NAME:DTYPE[:DIMS], e.g. {}:FP32:4 (repeatable; DTYPE as Triton names it: "
        "FP32, INT64, STRING...; DIMS comma-separated, -1 for any size)"
    )
    parser.add_argument(
        "--input", "-i", action="append", default=[], help="an input: " + spec_help.format("INPUT0")
    )
    parser.add_argument(
        "--output",
        "-o",
        action="append",
        default=[],
        help="an output: " + spec_help.format("OUTPUT0"),
    )
    parser.add_argument(
        "--target", default="add_sub", help="bls: the model execute() calls (default add_sub)"
    )
    parser.add_argument("--force", action="store_true", help="write into a non-empty DIR")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    name = args.name or directory.resolve().name
    if not name or "/" in name:
        raise SpecError(f"model name {name!r}: give --name")
    ins, outs, dims = DEFAULTS[args.template]
    model = Model(
        args.template,
        name,
        parse_specs(args.input, ins, dims),
        parse_specs(args.output, outs, None),
        target=args.target,
    )
    if directory.exists() and any(directory.iterdir()) and not args.force:
        print(
            f"pybackend new: {directory} exists and is not empty (--force writes into it)",
            file=sys.stderr,
        )
        return 1
    test_name = f"test_{''.join(c if c.isalnum() else '_' for c in name)}.py"
    files = {
        directory / "config.pbtxt": config_pbtxt(model),
        directory / "1" / "model.py": model_py(model),
        directory / test_name: generated_test(model, test_name),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    print(f"next: pytest {directory / test_name}")
    return 0
