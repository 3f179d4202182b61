"""The one builder of fake filesystem roots for PYBACKEND_CGROUP_ROOT, the test hook of the
cgroup reader (csrc/ipc/cgroup.h, pybackend/ipc/cgroup.py): a directory standing in for "/"
whose /proc/self/cgroup, /sys/fs/cgroup files and /proc/meminfo the backend and the stub read
instead of the real ones. The files are read at every use, so a test may rewrite them while a
server runs on the root."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def fake_cgroup_root(
    root: Path,
    cgroup: str,
    files: Mapping[str, str] | None = None,
    mem_available: int | None = None,
) -> Path:
    """Write into ``root``: ``cgroup`` as /proc/self/cgroup (e.g. "0::/kubepods/pod1/ctr"),
    each of ``files`` (paths relative to /sys/fs/cgroup, e.g. "kubepods/pod1/memory.max") with
    its text, the directories between made, and, when ``mem_available`` (bytes) is given, a
    /proc/meminfo saying so. Files already there and not named stay. Returns ``root``."""
    (root / "proc" / "self").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "self" / "cgroup").write_text(cgroup.rstrip("\n") + "\n")
    for relative, text in (files or {}).items():
        path = root / "sys" / "fs" / "cgroup" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.rstrip("\n") + "\n")
    if mem_available is not None:
        (root / "proc" / "meminfo").write_text(
            f"MemTotal: {4 * mem_available // 1024} kB\nMemFree: 1024 kB\n"
            f"MemAvailable: {mem_available // 1024} kB\n"
        )
    return root
