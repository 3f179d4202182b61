"""`pybackend check-env PATH`: prepare an EXECUTION_ENV_PATH value as the backend will at
model load (unpacking an archive into the cache) and start the stub's interpreter in it, so
a conda-pack archive or a venv is known to work before a server loads a model with it."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from pybackend.cli.command import add_command
from pybackend.execution_env import EnvError, package_parent, prepare


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "check-env",
        help="check a Python environment (directory or archive) for EXECUTION_ENV_PATH",
        description=(
            "Resolve PATH as the backend resolves the model parameter EXECUTION_ENV_PATH "
            "(an archive is unpacked into the cache, where the server will find it), then "
            "run `python -m pybackend.stub --version` with the environment's interpreter. "
            "Exits non-zero with the reason and the fix when the stub could not run there."
        ),
        epilog="example:\n  pybackend check-env envs/torch.tar.gz --model-dir models/classifier",
    )
    parser.add_argument(
        "path",
        help=(
            "the environment: a directory or a tar archive; a value pasted from config.pbtxt "
            "may hold $$TRITON_MODEL_DIRECTORY (in single quotes, so the shell leaves it)"
        ),
    )
    parser.add_argument(
        "--model-dir",
        default=os.getcwd(),
        help=(
            "the model's directory: where a relative PATH starts and what "
            "$$TRITON_MODEL_DIRECTORY stands for, as for a model (default: the current "
            "directory)"
        ),
    )
    parser.set_defaults(run=run)


PLACEHOLDER = "$$TRITON_MODEL_DIRECTORY"
# `$$` in an unquoted or double-quoted shell word is the shell's pid: "12345TRITON_MODEL_...".
_SHELL_EXPANDED = re.compile(r"\d+TRITON_MODEL_DIRECTORY")


def expand_model_directory(value: str, model_dir: str) -> str:
    """The value as the backend reads it at load: $$TRITON_MODEL_DIRECTORY is the model's
    directory (csrc/backend/model_state.cc does the same replacement)."""
    value = _SHELL_EXPANDED.sub(lambda _m: PLACEHOLDER, value)
    return value.replace(PLACEHOLDER, os.path.abspath(model_dir))


def run(args: argparse.Namespace) -> int:
    value = expand_model_directory(args.path, args.model_dir)
    if value != args.path:
        print(f"EXECUTION_ENV_PATH {args.path!r} is {value} for the model in {args.model_dir}")
    try:
        env = prepare(value, args.model_dir, package_parent())
    except EnvError as e:
        print(f"pybackend check-env: {e}", file=sys.stderr)
        return 1
    if env.note:
        print(env.note)
    child_env = {k: v for k, v in os.environ.items() if k not in env.unset}
    child_env.update(env.env)
    child_env["PYTHONPATH"] = env.pythonpath
    done = subprocess.run(
        [env.python, "-m", "pybackend.stub", "--version"],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode
