"""The one Python reader of cgroup limits: the smallest limit over this process's cgroup and
its ancestors (csrc/ipc/cgroup.h holds the backend's half of the same rule).

A limit usually sits above our own cgroup: a Kubernetes pod's limit on the pod's cgroup above
the container's, a systemd slice's on the slice.
"""

from __future__ import annotations

import os
from typing import Callable, List

#: What a reader returns when a cgroup sets no limit (or one that makes no sense).
NO_LIMIT = (1 << 64) - 1

Reader = Callable[[str], int]


def cgroup_root() -> str:
    """PYBACKEND_CGROUP_ROOT, or "": replaces "/" as the root the cgroup files (and
    /proc/meminfo) are read under. A test hook for fake cgroup trees, not a setting."""
    return os.environ.get("PYBACKEND_CGROUP_ROOT", "")


def read_cgroup_number(path: str) -> int:
    """The number in the file, or NO_LIMIT when it is missing, "max" or not a number (the
    format of memory.max and memory.limit_in_bytes)."""
    try:
        with open(path) as f:
            text = f.read().split()
        value = NO_LIMIT if not text or text[0] == "max" else int(text[0])
    except (OSError, ValueError):
        return NO_LIMIT
    return value if value >= 0 else NO_LIMIT


def _smallest_upward(mount: str, path: str, read: Reader) -> int:
    """The smallest limit of the cgroup ``path`` and its ancestors under the hierarchy mounted
    at ``mount``. Where the path is not there (a cgroup v1 container whose own cgroup is
    bind-mounted at the mount point), the mount itself is our cgroup."""
    path = path.rstrip("/")
    if not path.startswith("/") or not os.path.isdir(mount + path):
        path = ""
    smallest = NO_LIMIT
    while True:
        smallest = min(smallest, read(mount + path))
        if not path:
            return smallest
        path = path[: path.rfind("/")]


def smallest_cgroup_limit(root: str, v1_name: str, read_v2: Reader, read_v1: Reader) -> int:
    """The smallest limit of a controller over this process's cgroup and its ancestors, or
    NO_LIMIT. ``root`` is prepended to /proc/self/cgroup and /sys/fs/cgroup. "0::<path>" is
    the v2 hierarchy (``read_v2`` gets each cgroup directory), a line listing ``v1_name`` its
    v1 hierarchy (``read_v1``), mounted under the joined names or the controller's own; a
    hybrid host lists both and the smaller applies."""
    try:
        with open(root + "/proc/self/cgroup") as f:
            lines: List[str] = f.read().splitlines()
    except OSError:
        return NO_LIMIT
    mount = root + "/sys/fs/cgroup"
    smallest = NO_LIMIT
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            smallest = min(smallest, _smallest_upward(mount, path, read_v2))
        elif v1_name in controllers.split(","):
            joined = f"{mount}/{controllers}"
            base = joined if os.path.isdir(joined) else f"{mount}/{v1_name}"
            smallest = min(smallest, _smallest_upward(base, path, read_v1))
    return smallest
