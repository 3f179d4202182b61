"""Start a real tritonserver for one feature's model repository, with the selected backend."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
from collections.abc import Iterable, Mapping

from pybackend.server import TritonServer

from .backend import selected_backend
from .backends_dir import backend_dir_env
from .deferred_stop import DeferredStopServer

# Environment every server of the suite gets. PYTHONDONTWRITEBYTECODE is blanked (empty
# means unset to CPython) so that "no __pycache__ in the model repository" is a real check.
BASE_ENV = {"PYTHONDONTWRITEBYTECODE": ""}
ENSEMBLE = re.compile(r'platform\s*:\s*"ensemble"')


def copy_repository(models_dir: pathlib.Path, tmp_root: pathlib.Path) -> pathlib.Path:
    """Copy a feature's ``models/`` into a scratch dir; tests may then edit it freely."""
    target = tmp_root / "models"
    shutil.copytree(models_dir, target, ignore=shutil.ignore_patterns("__pycache__"))
    force_instance_process(target)
    return target


def force_instance_process(repository: pathlib.Path) -> None:
    """PYBACKEND_TEST_INSTANCE_PROCESS=shared|fork: every non-ensemble model of the copy gets
    that PYBACKEND_INSTANCE_PROCESS (unless it names one), so the suite checks that a model
    keeps the contract's behaviour when its instances share a process (docs/instances.md)."""
    mode = os.environ.get("PYBACKEND_TEST_INSTANCE_PROCESS", "")
    if not mode or selected_backend() == "original":
        return
    for config in repository.glob("*/config.pbtxt"):
        text = config.read_text()
        if ENSEMBLE.search(text) or "PYBACKEND_INSTANCE_PROCESS" in text:
            continue
        config.write_text(
            text + f'\nparameters {{ key: "PYBACKEND_INSTANCE_PROCESS" '
            f'value: {{ string_value: "{mode}" }} }}\n'
        )


def start_server(
    model_repository: pathlib.Path,
    *,
    extra_args: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    model_control_mode: str | None = None,
    load_models: Iterable[str] = (),
    ready_timeout: float = 90.0,
    backend_dir: pathlib.Path | None = None,
) -> TritonServer:
    """An un-entered TritonServer for the selected backend (use it as a context manager;
    a module fixture's server stops on a thread at its teardown: deferred_stop).

    ``backend_dir``: a backends directory to serve from instead (conformance_support.
    backends_dir builds one whose ``python`` is the selected backend)."""
    return DeferredStopServer(
        model_repository,
        backend=str(backend_dir) if backend_dir is not None else selected_backend(),
        extra_args=tuple(extra_args),
        env={**BASE_ENV, **(backend_dir_env() if backend_dir is not None else {}), **(env or {})},
        ready_timeout=ready_timeout,
        model_control_mode=model_control_mode,
        load_models=tuple(load_models),
    )


def trace_args(trace_file: pathlib.Path) -> list[str]:
    """tritonserver flags that trace every request (mode triton, timestamps) into
    ``trace_file``, which the server writes when it exits."""
    return [
        f"--trace-config=triton,file={trace_file}",
        "--trace-config=level=TIMESTAMPS",
        "--trace-config=rate=1",
        "--trace-config=mode=triton",
    ]
