"""The directory put first on a stub's PYTHONPATH when it runs in an execution environment.

Outside one, the stub's PYTHONPATH starts with the directory that holds pybackend, which
for a wheel install is the whole site-packages of the server's environment: in another
environment that would shadow its own numpy and everything else. This directory holds only
links to pybackend and triton_python_backend_utils.py."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

MODULES = ("pybackend", "triton_python_backend_utils.py")


def import_root(package_parent: Path, under: Path) -> Path:
    package_parent = package_parent.resolve()
    links = {n: package_parent / n for n in MODULES if (package_parent / n).exists()}
    key = hashlib.sha256(str(package_parent).encode()).hexdigest()[:16]
    root = under / key
    if _holds(root, links):
        return root
    under.mkdir(parents=True, exist_ok=True)
    tmp = under / f".{key}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name, target in links.items():
        os.symlink(target, tmp / name)
    try:
        os.rename(tmp, root)
    except OSError:  # made meanwhile by another load, or stale: theirs is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)
        if not _holds(root, links):
            shutil.rmtree(root, ignore_errors=True)
            return import_root(package_parent, under)
    return root


def _holds(root: Path, links: dict) -> bool:
    try:
        names = {p.name: os.readlink(p) for p in root.iterdir()}
    except OSError:
        return False
    return names == {n: str(t) for n, t in links.items()}
