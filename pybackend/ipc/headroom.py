"""How much memory a new shared-memory segment may take before reserving it would OOM-kill
(csrc/ipc/memory_headroom.h holds the backend's half of the same rule).

Segments are reserved with ``posix_fallocate`` so running out is an error, not a SIGBUS. But
on a memfd, which has no size limit of its own, a fallocate larger than the free memory does
not fail: the kernel reclaims, then its OOM killer kills processes to make room. A segment
larger than what is left is refused first, with the figures.
"""

from __future__ import annotations

from typing import Optional, Tuple

from .cgroup import NO_LIMIT, cgroup_root, read_cgroup_number, smallest_cgroup_limit

#: Smaller segments are not checked: they cannot kill anything, and skip reading /proc.
CHECK_FROM = 8 << 20


def _mem_available() -> int:
    try:
        with open(cgroup_root() + "/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return NO_LIMIT


def _cgroup_limit() -> int:
    """The smallest memory limit of our cgroup and its ancestors (v2 memory.max, v1
    memory.limit_in_bytes), so a pod's or slice's limit above ours counts."""
    return smallest_cgroup_limit(
        cgroup_root(),
        "memory",
        lambda d: read_cgroup_number(d + "/memory.max"),
        lambda d: read_cgroup_number(d + "/memory.limit_in_bytes"),
    )


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
