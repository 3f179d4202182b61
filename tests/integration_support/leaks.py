"""Find tritonserver/stub processes and /dev/shm files that a test left behind."""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from pybackend.server.processes import alive, descendants

# Every process the test run starts inherits this tag, so the check can tell our leftovers
# from processes of anyone else working on the same machine (orphans included).
LEAK_TAG_ENV = "PYBACKEND_TEST_LEAK_TAG"
LEAK_TAG = os.environ.setdefault(LEAK_TAG_ENV, f"{os.getpid()}-{uuid.uuid4().hex}")

SERVER_PROCESS = re.compile(r"tritonserver|triton_python_backend_stub|pybackend[./]stub")
#: NVIDIA's backend leaves these behind (a known leak of the original); ours must leave nothing.
ORIGINAL_SHM_LEAK = re.compile(r"triton_python_backend_shm_region_")
SHM_DIR = Path("/dev/shm")


def _read_proc(pid: str, name: str) -> bytes:
    try:
        return Path("/proc", pid, name).read_bytes()
    except OSError:
        return b""


def server_processes() -> dict[int, str]:
    """Live tritonserver/stub processes started by this test run: pid -> command line."""
    me = os.getpid()
    mine = descendants(me)
    tag = f"{LEAK_TAG_ENV}={LEAK_TAG}".encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        cmdline = _read_proc(entry.name, "cmdline").replace(b"\0", b" ").decode(errors="replace")
        if not SERVER_PROCESS.search(cmdline) or not alive(int(entry.name)):
            continue
        if int(entry.name) in mine or tag in _read_proc(entry.name, "environ").split(b"\0"):
            found[int(entry.name)] = cmdline.strip()
    return found


def shm_files() -> set[str]:
    try:
        return {p.name for p in SHM_DIR.iterdir()}
    except OSError:
        return set()


def dev_shm_in_use(pids: set[int]) -> set[str]:
    """Paths under /dev/shm that any of pids has mapped or open (deleted ones included)."""
    used = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue  # exited meanwhile
        used |= {line.split(None, 5)[-1] for line in maps.splitlines() if "/dev/shm/" in line}
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("/dev/shm/"):
                used.add(target)
    return used


def leaks_since(
    before_procs: Mapping[int, str], before_shm: set[str], grace: float = 10.0
) -> list[str]:
    """What appeared since the snapshot and is still there after a bounded grace period."""
    deadline = time.monotonic() + grace
    while True:
        # Children of a server that was already running (a stub it restarted) are its own
        # business; the session-wide check still sees them if they outlive it.
        owned = set().union(*(descendants(p) for p in before_procs if alive(p)))
        procs = {
            p: c for p, c in server_processes().items() if p not in before_procs and p not in owned
        }
        shm = {n for n in shm_files() - before_shm if not ORIGINAL_SHM_LEAK.match(n)}
        if not (procs or shm) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    problems = [f"process {pid} still running: {cmd[:200]}" for pid, cmd in sorted(procs.items())]
    problems += [f"/dev/shm/{name} left behind" for name in sorted(shm)]
    return problems
