"""EXECUTION_ENV_PATH: the Python environment a model's stubs run in (spec section 5.1,
UV-18/19/20).

The backend runs ``python -m pybackend.execution_env`` once per model load with the
parameter's value and gets back, as JSON, the interpreter to start the stubs with, the
directory to put first on their PYTHONPATH and the environment variables to set. The value
may be a directory (a venv, a ``uv`` venv, a conda prefix, any prefix with ``bin/python3``;
no ``activate`` script needed) or an archive (a conda-pack ``.tar.gz`` or any tar file),
which is unpacked once into a cache keyed by its content and shared by every model and
instance that names the same content. A relative path is taken from the model directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from .archive import unpack_cached
from .cache import cache_root
from .errors import EnvError
from .import_root import import_root
from .layout import python_of

__all__ = ["EnvError", "PreparedEnv", "interpreter", "locate", "package_parent", "prepare"]


@dataclass
class PreparedEnv:
    prefix: str  # the environment's directory (an archive's unpacked copy)
    python: str  # <prefix>/bin/python3
    pythonpath: str  # holds pybackend and triton_python_backend_utils, nothing else
    env: Dict[str, str] = field(default_factory=dict)  # set in the stubs' environment
    unset: List[str] = field(default_factory=list)  # removed from it
    note: str = ""  # what was done, for the server log


def locate(value: str, model_dir: str) -> Path:
    """The path `value` names (relative ones start at `model_dir`); EnvError where there
    is nothing (`pybackend validate` checks configs with it, without unpacking)."""
    path = Path(model_dir, value) if not os.path.isabs(value) else Path(value)
    if not path.exists():
        where = "" if os.path.isabs(value) else f" (relative paths start at {model_dir})"
        raise EnvError(
            f"EXECUTION_ENV_PATH '{path}' does not exist{where}. Point it at a Python "
            "environment: a directory with bin/python3 (a venv or conda prefix) or a "
            "conda-pack archive."
        )
    return path


def interpreter(prefix: Path, origin: str = "") -> Path:
    """<prefix>/bin/python3; EnvError where `prefix` is no Python environment."""
    python = python_of(prefix)
    if python is None:
        raise EnvError(
            f"EXECUTION_ENV_PATH '{prefix}'{origin} has no bin/python3: it is not a Python "
            "environment. Use a venv (python3 -m venv), a conda prefix or a conda-pack "
            "archive of one."
        )
    return python


def prepare(
    value: str, model_dir: str, package_parent: str, cache: str | None = None
) -> PreparedEnv:
    """Resolve `value` (already with $$TRITON_MODEL_DIRECTORY replaced) for a model whose
    directory is `model_dir`; `package_parent` is the directory holding pybackend."""
    path = locate(value, model_dir)
    root = Path(cache) if cache else cache_root()
    note = ""
    if path.is_file():
        prefix, note = unpack_cached(path, root / "envs")
    else:
        prefix = path.resolve()
    python = interpreter(prefix, f" (unpacked from {path})" if path.is_file() else "")
    return PreparedEnv(
        prefix=str(prefix),
        python=str(python),
        pythonpath=str(import_root(Path(package_parent), root / "import")),
        env=_activation(prefix),
        unset=["PYTHONHOME"],
        note=note,
    )


def package_parent() -> str:
    """The directory holding the pybackend package this code was imported from."""
    return str(Path(__file__).resolve().parents[2])


def _activation(prefix: Path) -> Dict[str, str]:
    """What an activate script would set (the original sets the same and no longer runs the
    script): model code that starts `python3` or loads the environment's shared libraries
    finds the environment's own."""

    def prepend(name: str, entry: str) -> str:
        old = os.environ.get(name, "")
        return f"{entry}:{old}" if old else entry

    return {
        "VIRTUAL_ENV": str(prefix),
        "VIRTUAL_ENV_PROMPT": f"({prefix})",
        "PATH": prepend("PATH", str(prefix / "bin")),
        "LD_LIBRARY_PATH": prepend("LD_LIBRARY_PATH", str(prefix / "lib")),
    }
