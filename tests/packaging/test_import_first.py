"""Every module of pybackend can be the first one a program imports.

test_import_graph.py checks the stub and the harness for loops statically; this runs the
imports. A loop that only bites in one order (``a`` imports ``b`` at its end, ``b`` imports
``a`` at its top: importing ``a`` first works, ``b`` first raises ImportError) passes every
test that happens to import ``a`` first. So each module is imported in a fresh set of
pybackend modules: one child interpreter drops every ``pybackend`` entry of ``sys.modules``
before each import (third-party modules stay loaded: they are not ours to check).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs in the child. An ImportError for a module outside pybackend (torch, cupy and other
# optional dependencies) is that environment's, not a loop of ours.
_CHILD = r"""
import importlib, json, pkgutil, sys
import pybackend

def ours(name):
    return name == "pybackend" or name.startswith("pybackend.")

names = sorted(
    m.name for m in pkgutil.walk_packages(pybackend.__path__, "pybackend.")
    # __main__ runs the CLI; libpybackend_native is a C library loaded with ctypes.
    if not m.name.endswith("__main__") and not m.name.endswith("libpybackend_native")
)
failed = {}
for name in names:
    for key in [k for k in sys.modules if ours(k)]:
        del sys.modules[key]
    try:
        importlib.import_module(name)
    except ImportError as error:
        if error.name is None or ours(error.name):
            failed[name] = repr(error)
    except Exception as error:
        failed[name] = repr(error)
print(json.dumps({"checked": names, "failed": failed}))
"""


def test_every_module_imports_first() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The walk must see the packages it is meant to check, the private modules included.
    for module in (
        "pybackend.stub.returns",
        "pybackend.pytriton._remote_triton",
        "pybackend.pytriton.triton",
        "pybackend.testing.harness",
    ):
        assert module in report["checked"]
    assert report["failed"] == {}, "\n".join(
        f"{name}: {error}" for name, error in report["failed"].items()
    )
