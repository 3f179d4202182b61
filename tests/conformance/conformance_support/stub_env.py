"""The environment the stubs of the selected backend run in, and what it can import.

Cases that need a package the model imports (torch) skip where the stubs' interpreter lacks
it: torch's CPU wheel exists for some Pythons only (scripts/install_torch_cpu.sh), and
`make test-pythons` runs this suite with the stubs under 3.9 and 3.13.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from pybackend.server import locate

from .backend import is_original

TORCH_MISSING = "torch not installed in this stub environment"

#: Set by `make test-numpy1` and `make test-pythons`: this run repeats the suite only to run
#: our stubs under another interpreter; a case that involves no stub of ours (the original's
#: own run) checks nothing new in it, and the default run of `make test` has done it.
STUB_RERUN_ENV = "PYBACKEND_TEST_STUB_RERUN"


def skip_unless_stubs_involved(why: str) -> None:
    """Skip in a repeat run of the suite for another stub interpreter (STUB_RERUN_ENV)."""
    if os.environ.get(STUB_RERUN_ENV):
        pytest.skip(f"{STUB_RERUN_ENV}: involves no stub of ours ({why}); the default run did it")


def stub_python() -> str:
    """The interpreter the selected backend's stubs run with: the original's is the first
    `python3` on PATH, `.venv-orig`'s (pybackend.server puts it there)."""
    if is_original():
        return str(locate.original_venv() / "bin" / "python3")
    return our_stub_python()


def our_stub_python() -> str:
    """Our stubs' interpreter, in the backend's order: PYBACKEND_PYTHON, the
    `python_executable` file next to the library, else this one."""
    if os.environ.get("PYBACKEND_PYTHON"):
        return os.environ["PYBACKEND_PYTHON"]
    record = locate.our_backend_dir() / "python" / "python_executable"
    recorded = record.read_text().strip() if record.is_file() else ""
    return recorded or sys.executable


@functools.cache
def can_import(python: str, module: str) -> bool:
    """Whether `python` finds `module` (a lookup, not an import: cheap)."""
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)
    return done.returncode == 0


def needs_torch(python: str | None = None) -> pytest.MarkDecorator:
    """`pytestmark = needs_torch()`: the module's models import torch; `python` the stubs'
    interpreter where it is not the selected backend's."""
    found = can_import(python or stub_python(), "torch")
    return pytest.mark.skipif(not found, reason=TORCH_MISSING)
