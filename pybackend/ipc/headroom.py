"""How much memory a new shared-memory segment may take before reserving it would OOM-kill
(csrc/ipc/memory_headroom.h holds the backend's half of the same rule).

Segments are reserved with ``posix_fallocate`` so running out is an error, not a SIGBUS. But
on a memfd, which has no size limit of its own, a fallocate larger than the free memory does
not fail: the kernel reclaims, then its OOM killer kills processes to make room. A segment
larger than what is left is refused first, with the figures.
"""

from __future__ import annotations

import os
from typing import Optional, Tuple

#: Smaller segments are not checked: they cannot kill anything, and skip reading /proc.
CHECK_FROM = 8 << 20
_UNKNOWN = (1 << 64) - 1


def _root() -> str:
    # PYBACKEND_CGROUP_ROOT: the test hook of csrc/backend/cores.cc, a fake tree for "/".
    return os.environ.get("PYBACKEND_CGROUP_ROOT", "")


def _read_number(path: str) -> int:
    try:
        with open(path) as f:
            text = f.read().strip()
        return _UNKNOWN if text == "max" else int(text)
    except (OSError, ValueError):
        return _UNKNOWN


def _mem_available() -> int:
    try:
        with open(_root() + "/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return _UNKNOWN


def _cgroup_limit() -> int:
    """The memory limit of our own cgroup (v2 memory.max, v1 memory.limit_in_bytes); where
    our path is not there (a container's cgroup mounted at the mount point), the mount's."""
    limit = _UNKNOWN
    try:
        with open(_root() + "/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return limit
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            base, name = _root() + "/sys/fs/cgroup", "memory.max"
        elif "memory" in parts[1].split(","):
            base, name = _root() + "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
        else:
            continue
        own = _read_number(f"{base}{parts[2].rstrip('/')}/{name}")
        if own == _UNKNOWN:
            own = _read_number(f"{base}/{name}")
        limit = min(limit, own)
    return limit


def memory_headroom() -> Tuple[int, str]:
    """Bytes a new segment may reserve, and which figure bounds it. Only the cgroup's limit
    itself counts, not its headroom: its usage includes page cache the kernel reclaims."""
    available, limit = _mem_available(), _cgroup_limit()
    if limit < available:
        return limit, f"the memory limit of the container (cgroup) is {limit} bytes"
    return available, f"the machine has {available} bytes of memory available (MemAvailable)"


def headroom_error(size: int) -> Optional[str]:
    """Why a segment of ``size`` bytes must not be reserved, or None when it may be."""
    if size < CHECK_FROM:
        return None
    headroom, why = memory_headroom()
    if size <= headroom:
        return None
    return (
        f"could not reserve {size} bytes of shared memory for tensors: {why}, so reserving it "
        "would make the kernel kill processes (OOM) (give the machine or container more "
        "memory, lower shm-default-byte-size or shm-growth-byte-size, or return smaller tensors)"
    )
