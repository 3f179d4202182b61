"""How the harness starts a stub process (or the host process instances share) as the
backend does: its environment, its sockets on fds 3 and 4, and the INIT arguments that
tell the stub which model to load (docs/protocol.md)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..ipc.protocol import PROTOCOL_VERSION

#: The directory holding the ``pybackend`` package and ``triton_python_backend_utils``
#: (the checkout, or site-packages): the stub imports both from there.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def stub_environment(env: Dict[str, str], unset: Sequence[str], **fixed: str) -> Dict[str, str]:
    """The environment of a process running ``pybackend.stub`` (or its host): ours and
    ``fixed``, unbuffered, writing no bytecode, with PACKAGE_ROOT first on PYTHONPATH; then
    ``env``; without the variables named in ``unset``."""
    child_env = dict(os.environ)
    child_env.update(
        fixed,
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=os.pathsep.join(
            [str(PACKAGE_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        ),
    )
    child_env.update(env)
    for name in unset:
        child_env.pop(name, None)
    return child_env


def on_fds_3_and_4(first: int, second: int) -> Callable[[], None]:
    """A ``preexec_fn`` that puts ``first`` and ``second`` on fds 3 and 4 of the child, as
    the backend passes them; every other inheritable fd of ours stays open for the child to
    close."""

    def preexec() -> None:
        a, b = os.dup(first), os.dup(second)
        os.dup2(a, 3)
        os.dup2(b, 4)
        os.close(a)
        os.close(b)

    return preexec


def start_on_fds_3_and_4(
    argv: List[str], first: int, second: int, env: Dict[str, str], cwd: Path
) -> "subprocess.Popen[bytes]":
    """``argv`` started with ``first`` and ``second`` on its fds 3 and 4 (on_fds_3_and_4),
    no stdin, its stdout and stderr on pipes for the caller to read."""
    return subprocess.Popen(
        argv,
        close_fds=False,
        preexec_fn=on_fds_3_and_4(first, second),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(cwd),
    )


def init_args(
    model_file: Path,
    config: Optional[dict],
    phase: str,
    decoupled: bool,
    instance: str,
    inline_threshold: int,
) -> Dict[str, Any]:
    """INIT's arguments for ``phase`` of the model in ``model_file`` (its name and version
    from the path, ``<repository>/<name>/<version>/model.py``) as instance ``instance``."""
    config = dict(config or {"name": model_file.parent.parent.name})
    return {
        "protocol_version": PROTOCOL_VERSION,
        "phase": phase,
        "model_name": model_file.parent.parent.name,
        "model_version": model_file.parent.name,
        "model_repository": str(model_file.parent.parent),
        "model_file": str(model_file),
        "version_dir": str(model_file.parent),
        "instance_name": instance,
        "instance_kind": "CPU",
        "device_id": "0",
        "model_config": json.dumps(config),
        "decoupled": decoupled,
        "runtime_modeldir": "DEFAULT",
        "inline_threshold": inline_threshold,
        "shm_default_byte_size": 1 << 20,
        "shm_growth_byte_size": 1 << 20,
        "log_verbose": 0,
    }
