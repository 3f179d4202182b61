"""Start a real tritonserver for one feature's model repository.

Prefers the project's launcher (``pybackend.server.TritonServer``); falls back to the
suite's own ``local_server`` with the same interface while that does not exist yet.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

from .backend import selected_backend

try:  # the project's launcher, once the packaging work has landed
    from pybackend.server import TritonServer as _ServerClass

    LAUNCHER = "pybackend.server"
except ImportError:  # pragma: no cover - depends on the state of the tree
    from .local_server import TritonServer as _ServerClass

    LAUNCHER = "conformance_support.local_server"

# Environment every server of the suite gets. PYTHONDONTWRITEBYTECODE is blanked (empty
# means unset to CPython) so that "no __pycache__ in the model repository" is a real check.
BASE_ENV = {"PYTHONDONTWRITEBYTECODE": ""}


def copy_repository(models_dir: pathlib.Path, tmp_root: pathlib.Path) -> pathlib.Path:
    """Copy a feature's ``models/`` into a scratch dir; tests may then edit it freely."""
    target = tmp_root / "models"
    shutil.copytree(models_dir, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def start_server(
    model_repository: pathlib.Path,
    *,
    extra_args: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    model_control_mode: str | None = None,
    load_models: Iterable[str] = (),
    backend_config: Iterable[str] = (),
    ready_timeout: float = 90.0,
) -> Any:
    """An un-entered TritonServer for the selected backend (use it as a context manager)."""
    merged_env = dict(BASE_ENV)
    merged_env.update(env or {})
    return _ServerClass(
        model_repository,
        backend=selected_backend(),
        extra_args=tuple(extra_args),
        env=merged_env,
        ready_timeout=ready_timeout,
        model_control_mode=model_control_mode,
        load_models=tuple(load_models),
        backend_config=tuple(backend_config),
    )


def scratch_dir(prefix: str) -> pathlib.Path:
    return pathlib.Path(tempfile.mkdtemp(prefix=f"pb-conf-{prefix}-", dir=os.environ.get("TMPDIR")))
