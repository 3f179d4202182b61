"""Process-tree helpers (Linux /proc): find every descendant so none survives a stop."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from pybackend.server.addresses import family


def _parent_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # The command name is in parentheses and may itself contain spaces or ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> set[int]:
    """All live descendants of pid (children, grandchildren, ...)."""
    children: dict[int, list[int]] = {}
    for child, parent in _parent_map().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def with_arguments(*needles: bytes, exact: bool = False) -> set[int]:
    """Live processes whose command line has an argument containing (``exact``: equal to)
    each of ``needles``: for processes that left the tree, e.g. a daemonized helper."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # exited while we looked
        if all(n in args if exact else any(n in a for a in args) for n in needles):
            found.add(int(entry.name))
    return found


def start_time(pid: int) -> int | None:
    """Start time of pid in clock ticks since boot (None if gone): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def same_processes(identities: dict[int, int | None]) -> set[int]:
    """The pids of identities ({pid: start_time}) that still are those very processes."""
    return {pid for pid, started in identities.items() if start_time(pid) == started}


def alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def kill_quietly(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def killpg_quietly(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    """Wait (bounded) until none of pids is alive; return those still alive."""
    deadline = time.monotonic() + timeout
    remaining = {p for p in pids if alive(p)}
    while remaining and time.monotonic() < deadline:
        time.sleep(0.02)
        remaining = {p for p in remaining if alive(p)}
    return remaining


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """count distinct ports that were free on host a moment ago (the kernel picks them).

    All sockets stay open until every port is chosen, so the kernel cannot hand out the
    same port twice.
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(family(host), socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(family(host), socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
