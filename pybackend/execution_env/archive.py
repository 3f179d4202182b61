"""Archived environments (conda-pack's .tar.gz, or any tar file): unpacked once into a cache
keyed by the archive's content, so every instance and model naming the same content shares
one copy, across loads and server restarts (UV-19). The original unpacks into a fresh
temporary directory per server and again whenever the file's mtime changes."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tarfile
import time
from pathlib import Path
from typing import Tuple

from .errors import EnvError
from .layout import dangling_link, python_of

_CHUNK = 1 << 20


def unpack_cached(archive: Path, envs: Path) -> Tuple[Path, str]:
    """The environment unpacked from `archive` under `envs`, and a note for the log."""
    prefix, note = _unpack_cached(archive, envs)
    _require_interpreter_here(archive, prefix)
    return prefix, note


def _require_interpreter_here(archive: Path, prefix: Path) -> None:
    """A venv packed on another machine links to an interpreter this one may not have."""
    dangling = dangling_link(prefix)
    if python_of(prefix) is None and dangling is not None:
        link, target = dangling
        raise EnvError(
            f"EXECUTION_ENV_PATH '{archive}': {link} is a link to {target}, which does not "
            "exist on this machine. A venv made by `python3 -m venv` holds only a link to the "
            "interpreter it was made with; install that interpreter here (at that path), "
            "make the venv with `python3 -m venv --copies`, or pack a conda environment "
            "with conda-pack."
        )


def _unpack_cached(archive: Path, envs: Path) -> Tuple[Path, str]:
    envs.mkdir(parents=True, exist_ok=True)
    digest = _digest(archive, envs / ".index")
    target = envs / digest[:32]
    if target.is_dir():
        return _env_top(target), f"using {target}, unpacked earlier from {archive}"
    with open(envs / f".{digest[:32]}.lock", "w") as lock:
        # Instances and models load in parallel: one unpacks, the others wait for it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():
            return _env_top(target), f"using {target}, unpacked from {archive} meanwhile"
        for stale in envs.glob(f".{digest[:32]}.tmp-*"):  # left by a process that died
            shutil.rmtree(stale, ignore_errors=True)
        started = time.monotonic()
        tmp = envs / f".{digest[:32]}.tmp-{os.getpid()}"
        try:
            _extract(archive, tmp)
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    took = time.monotonic() - started
    return _env_top(target), f"unpacked {archive} into {target} in {took:.1f} s"


def _digest(archive: Path, index: Path) -> str:
    """sha256 of the archive's bytes. Remembered per path with the file's size, mtime and
    inode, so an unchanged archive is not read again (a multi-GB environment takes seconds
    to hash)."""
    real = os.path.realpath(archive)
    st = os.stat(real)
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "dev": st.st_dev}
    entry = index / (hashlib.sha256(real.encode()).hexdigest()[:32] + ".json")
    try:
        known = json.loads(entry.read_text())
        if known.get("path") == real and known.get("stamp") == stamp:
            return str(known["sha256"])
    except (OSError, ValueError, KeyError):
        pass
    h = hashlib.sha256()
    with open(real, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    digest = h.hexdigest()
    index.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_name(f".{entry.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"path": real, "stamp": stamp, "sha256": digest}))
    os.replace(tmp, entry)
    return digest


# bin/python, bin/python3, bin/python3.11, ...: the names a venv links to its base interpreter.
# conda-pack's layout (files at the top) or one top directory (`tar -C parent env`).
_INTERPRETER = re.compile(r"(\./)?([^/]+/)?bin/python(\d+(\.\d+)?)?")


def _interpreter_link(member: tarfile.TarInfo) -> bool:
    """A plain `python -m venv` holds bin/python3 (or python3.X) as a link to the absolute
    path of the interpreter it was made with, outside the environment. Running the link
    is what activating the venv amounts to: Python finds the venv's pyvenv.cfg next to it
    and uses the venv's site-packages with the base interpreter's standard library."""
    return (
        member.issym()
        and os.path.isabs(member.linkname)
        and bool(_INTERPRETER.fullmatch(member.name))
    )


def _venv_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's "data" filter, except that an interpreter link may name an absolute path.
    Such a link is only ever created, never written through: a later entry whose path
    passes through it resolves outside `dest` and is refused by the data filter."""
    if not _interpreter_link(member):
        return tarfile.data_filter(member, dest)
    checked = tarfile.data_filter(member.replace(linkname="python", deep=False), dest)
    return checked.replace(linkname=member.linkname, deep=False)


def _extract(archive: Path, dest: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                # Refuses absolute names, '..', links leading outside (but a venv's
                # interpreter link), devices; drops set-uid bits (Python 3.12, and
                # 3.8-3.11 security releases).
                tar.extractall(dest, filter=_venv_filter)
            else:  # pragma: no cover - interpreters without extraction filters
                for member in tar.getmembers():
                    _check_member(member, dest)
                tar.extractall(dest)
    except (tarfile.TarError, OSError) as e:
        raise EnvError(
            f"EXECUTION_ENV_PATH '{archive}' cannot be unpacked: {e}. It must be a tar "
            "archive (conda-pack's .tar.gz) of a Python environment whose entries stay "
            "inside it, or a directory."
        ) from None


def _check_member(member: tarfile.TarInfo, dest: Path) -> None:  # pragma: no cover
    root = os.path.realpath(dest)
    names = [member.name]
    if member.issym() and not _interpreter_link(member):
        names.append(os.path.join(os.path.dirname(member.name), member.linkname))
    elif member.islnk():
        names.append(member.linkname)
    for name in names:
        full = os.path.realpath(os.path.join(root, name))
        if os.path.isabs(name) or os.path.commonpath([root, full]) != root:
            raise tarfile.TarError(f"entry {member.name!r} would be written outside {dest}")
    if member.isdev():
        raise tarfile.TarError(f"entry {member.name!r} is a device")


def _env_top(unpacked: Path) -> Path:
    """conda-pack archives hold the environment's files at the top; `tar -C parent env`
    holds one directory: either is accepted."""

    def has_interpreter(prefix: Path) -> bool:  # a dangling link is reported later
        return python_of(prefix) is not None or dangling_link(prefix) is not None

    if has_interpreter(unpacked):
        return unpacked
    entries = [p for p in unpacked.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and has_interpreter(entries[0]):
        return entries[0]
    return unpacked
