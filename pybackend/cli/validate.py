"""`pybackend validate PATH`: check a model directory or a whole repository offline for
what tritonserver would refuse at load, as `file:line: severity: message` lines."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, List

from pybackend.cli.command import add_command, add_runtime_option, runtimes_of

from .terminal import paint

EXAMPLE = """\
examples:
  pybackend validate examples/model_repository         # every model of a repository
  pybackend validate models/classifier --run           # also run the model once, offline
  pybackend validate models --json | jq '.errors'
  pybackend validate models --runtime my_runtime=backends/my_runtime   # a runtime's models

exit codes: 0 no errors (warnings allowed), 1 errors found, 2 bad command line.
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "validate",
        help="check a model or a repository for what tritonserver would refuse",
        description=(
            "Check PATH (a model directory or a repository of them) offline: config.pbtxt "
            "parsed with Triton's schema, the checks tritonserver and the backend make at "
            "load (names, data types, dims, batching, instance groups, parameters, "
            "EXECUTION_ENV_PATH), and model.py (it parses, its imports are there, it has "
            "TritonPythonModel.execute, the tensor names it spells are declared). Errors "
            "are what the server refuses; warnings, what it lets through but is likely wrong."
        ),
        epilog=EXAMPLE,
    )
    parser.add_argument("path", metavar="PATH", help="a model directory or a model repository")
    parser.add_argument(
        "--run",
        action="store_true",
        dest="run_model",
        help="also import model.py, run auto_complete_config and initialize, and send one "
        "generated request through the offline harness (runs the model's code)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_runtime_option(parser, "are checked with")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the other commands do not pay for the checks' imports (the harness).
    from pybackend.validate import ERROR, WARNING, validate
    from pybackend.validate.run_checks import PROGRESS_ENV

    try:
        runtimes = {name: Path(path) for name, path in runtimes_of(args.runtime).items()}
    except ValueError as e:
        print(f"pybackend validate: {e}", file=sys.stderr)
        return 2
    if args.run_model and PROGRESS_ENV not in os.environ:
        return _supervised(args, PROGRESS_ENV)
    reports = validate(Path(args.path), args.run_model, runtimes)
    errors = sum(r.count(ERROR) for r in reports)
    if args.json:
        warnings = sum(r.count(WARNING) for r in reports)
        doc = {"errors": errors, "warnings": warnings, "models": [r.as_dict() for r in reports]}
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(_lines(reports)))
    return 1 if errors else 0


def _supervised(args: argparse.Namespace, progress_env: str) -> int:
    """--run in a child process: model code that ends the process (os._exit, a crash)
    ends that one, and this one says which model it was and what it was doing."""
    with tempfile.TemporaryDirectory(prefix="pybackend-validate-") as tmp:
        progress = Path(tmp) / "progress"
        command = [sys.executable, "-m", "pybackend.cli", "validate", args.path, "--run"]
        command += ["--json"] if args.json else []
        command += [f"--runtime={item}" for item in args.runtime]
        done = subprocess.run(command, env={**os.environ, progress_env: str(progress)}, check=False)
        if done.returncode in (0, 1):
            return done.returncode
        where = progress.read_text() if progress.exists() else "starting"
        how = (
            f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        )
        print(
            f"pybackend validate: the model code ended the process ({how}): {where}. --run "
            "runs every model in one process; check that model without --run, or test it in a "
            "stub process (pybackend.testing.StubModel)",
            file=sys.stderr,
        )
        return 1


def _lines(reports: List[Any]) -> List[str]:
    from pybackend.validate import ERROR, NOTE, WARNING

    colours = {ERROR: "red", WARNING: "yellow", NOTE: "dim"}
    out: List[str] = []
    for report in reports:
        if report.skipped:
            out.append(f"{report.path}: skipped, {report.skipped}")
            continue
        if not report.count(ERROR) and not report.count(WARNING):
            out.append(f"{report.path}: {paint('ok', 'green')}")
        for f in report.findings:
            severity = paint(f.severity, colours[f.severity])
            out.append(f"{f.where(report.path)}: {severity}: {f.message}")
    checked = [r for r in reports if not r.skipped]
    bad = sum(1 for r in checked if r.count(ERROR))
    errors = sum(r.count(ERROR) for r in reports)
    warnings = sum(r.count(WARNING) for r in reports)
    summary = (
        f"{len(checked)} model{'s' if len(checked) != 1 else ''} checked: "
        f"{len(checked) - bad} without errors, {bad} with errors "
        f"({errors} error{'s' if errors != 1 else ''}, "
        f"{warnings} warning{'s' if warnings != 1 else ''})"
    )
    out.append(paint(summary, "bold", sys.stdout))
    return out
