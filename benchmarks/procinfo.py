"""What the stub processes cost, read from /proc: CPU time, RSS, shared memory.

Shared memory is counted the same way for both Python backends: every segment a process
maps or holds open that lives in /dev/shm (the original's regions) or is a memfd (ours),
deduplicated by inode across the server and its stubs. `size` is the segment's length,
`allocated` the tmpfs pages really backing it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_INSTANCE_ENV = b"PYBACKEND_INSTANCE="


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process (all its threads), 0.0 if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def instance_name(pid: int) -> str | None:
    """The Triton instance a stub serves: our stub's env, or the original stub's argv."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in environ:
        if item.startswith(_INSTANCE_ENV):
            return item[len(_INSTANCE_ENV) :].decode()
    # The original stub: <stub> <model.py> <shm region> <size> <growth> <ppid> <dir> <n> <inst> ...
    if cmdline and cmdline[0].endswith(b"triton_python_backend_stub") and len(cmdline) > 8:
        return cmdline[8].decode()
    return None


def model_of_instance(instance: str, models: list[str]) -> str | None:
    """Triton names instances '<model>_<group>_<index>' (or '<model>_<index>')."""
    for model in sorted(models, key=len, reverse=True):
        if instance.startswith(model + "_") and re.fullmatch(
            r"\d+(_\d+)?", instance[len(model) + 1 :]
        ):
            return model
    return None


@dataclass
class ShmUsage:
    segments: int = 0
    size: int = 0
    allocated: int = 0


def _is_shared(path: str) -> bool:
    return path.startswith("/dev/shm/") or path.startswith("/memfd:")


def shm_usage(pids: list[int]) -> ShmUsage:
    """Shared-memory segments reachable from any of pids (maps and open fds)."""
    seen: dict[tuple[int, int], os.stat_result] = {}
    for pid in pids:
        for stat in _segment_stats(pid):
            seen.setdefault((stat.st_dev, stat.st_ino), stat)
    usage = ShmUsage(segments=len(seen))
    for stat in seen.values():
        usage.size += stat.st_size
        usage.allocated += stat.st_blocks * 512
    return usage


def dev_shm_paths(pids: list[int]) -> set[str]:
    """/dev/shm files mapped by any of pids (the original backend's regions)."""
    paths = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        except OSError:
            continue
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/dev/shm/"):
                paths.add(parts[5].removesuffix(" (deleted)"))
    return paths


def _segment_stats(pid: int) -> list[os.stat_result]:
    found = []
    proc = Path(f"/proc/{pid}")
    try:
        maps = (proc / "maps").read_text().splitlines()
    except OSError:
        return found
    for line in maps:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and _is_shared(parts[5]):
            try:  # map_files names the mapping itself (works for deleted memfds; needs root)
                found.append(os.stat(proc / "map_files" / parts[0]))
            except OSError:
                path = parts[5].removesuffix(" (deleted)")
                if path.startswith("/dev/shm/") and os.path.exists(path):
                    found.append(os.stat(path))
    try:
        fds = list((proc / "fd").iterdir())
    except OSError:
        fds = []
    for fd in fds:
        try:
            if _is_shared(os.readlink(fd)):
                found.append(os.stat(fd))
        except OSError:
            continue
    return found
