"""A tritonserver backends directory of our own making, for python-based backends.

Layout, as a user of the original sets one up (its docs, "Python-based Backends"):
``<root>/backends/python`` is the selected backend's Python backend, a link to its directory
as docker/install.sh --replace-backend installs ours, and ``<root>/backends/<name>/`` holds
each runtime's ``model.py`` (and whatever it imports).
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import Mapping

from pybackend.server import locate

from .backend import is_original


def selected_python_backend() -> pathlib.Path:
    """The directory holding the selected backend's ``libtriton_python.so``."""
    backends = locate.original_backend_dir() if is_original() else locate.our_backend_dir()
    return backends / "python"


#: The files of a Python backend: the original's three, ours' library and the file naming
#: its stubs' interpreter.
_BACKEND_FILES = (
    "libtriton_python.so",
    "triton_python_backend_stub",
    "triton_python_backend_utils.py",
    "python_executable",
)


def python_based_backends(
    root: pathlib.Path, runtimes: Mapping[str, pathlib.Path], own_library: bool = False
) -> pathlib.Path:
    """``<root>/backends`` with ``python`` and a copy of each runtime directory as ``<name>``.

    ``own_library``: each runtime directory also gets a copy of the selected backend's files,
    which the original's docs say take priority over ``backends/python``'s (a runtime that
    needs another Python)."""
    backends = root / "backends"
    backends.mkdir(parents=True)
    python = selected_python_backend()
    os.symlink(python, backends / "python")
    for name, source in runtimes.items():
        shutil.copytree(source, backends / name, ignore=shutil.ignore_patterns("__pycache__"))
        for file in _BACKEND_FILES if own_library else ():
            if (python / file).is_file():
                shutil.copy2(python / file, backends / name / file)
    return backends


def backend_dir_env() -> dict[str, str]:
    """What a server on such a directory needs in its environment: the original's stub
    finds its numpy<2 environment first on PATH (TritonServer does this for "original")."""
    if not is_original():
        return {}
    path = os.environ.get("PATH", os.defpath)
    return {"PATH": os.pathsep.join([str(locate.original_venv() / "bin"), path])}
