"""Security of the transport: a stub inherits only the descriptors it needs (none of the
server's sockets, files or other stubs' channels), and shared memory is reachable only by
the server's user (memfd segments have no name anywhere; /proc/<pid>/fd is the only way in,
and the kernel refuses it to other users). That the backend checks every offset and length
a stub sends is shown in test_bad_output.py."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_support import big_infer, start, stubs

NOBODY = 65534


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start(["big_identity", "chaos"]) as s:
        yield s


def _fds(pid: int) -> dict[int, str]:
    out = {}
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        try:
            out[int(entry.name)] = os.readlink(entry)
        except OSError:
            continue
    return out


def test_stubs_hold_only_their_own_descriptors(server: Any, http: Any) -> None:
    client = http(server)
    big_infer(client, np.ones(1 << 20, np.uint8))  # segments on both sides
    server_pipes = {t for t in _fds(server.pid).values() if t.startswith("pipe:")}
    found = stubs(server)
    assert len(found) == 3
    for name, pid in found.items():
        fds = _fds(pid)
        assert fds[0] == "/dev/null", (name, fds)
        assert fds[1].startswith("pipe:") and fds[2].startswith("pipe:"), (name, fds)
        assert fds[3].startswith("socket:") and fds[4].startswith("socket:"), (name, fds)
        for fd, target in fds.items():
            if fd <= 4:
                continue
            # Its own memfd segments (Python's mmap keeps a dup of the fd it maps) and its
            # private wake-up pipe; nothing of the server's.
            own_pipe = target.startswith("pipe:") and target not in server_pipes
            assert target.startswith("/memfd:") or own_pipe, (name, fd, target)


def test_shared_memory_is_out_of_reach_of_other_users(server: Any, http: Any) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    client = http(server)
    big_infer(client, np.ones(1 << 20, np.uint8))
    (stub,) = stubs(server, "big_identity").values()
    targets = []
    for pid in (server.pid, stub):
        for fd, target in _fds(pid).items():
            if target.startswith("/memfd:"):
                targets.append(f"/proc/{pid}/fd/{fd}")
    assert targets, "no memfd segment found"
    # Another user may neither open them nor list the descriptors (plain sh and head:
    # the test's own interpreter may live where that user cannot read).
    probe = 'n=0; for p; do head -c1 "$p" >/dev/null 2>&1 && n=$((n+1)); done; echo $n'
    listing = f"ls /proc/{stub}/fd >/dev/null 2>&1 && echo listed || echo refused"
    as_nobody = {"user": NOBODY, "group": NOBODY, "extra_groups": [], "cwd": "/"}
    opened = subprocess.run(
        ["sh", "-c", probe, "sh", *targets],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        **as_nobody,
    )
    assert opened.stdout.strip() == "0", opened
    listed = subprocess.run(
        ["sh", "-c", listing], capture_output=True, text=True, timeout=30, check=True, **as_nobody
    )
    assert listed.stdout.strip() == "refused"
    # The same probe as the server's own user opens every one (the probe is sound).
    same = subprocess.run(
        ["sh", "-c", probe, "sh", *targets], capture_output=True, text=True, check=True
    )
    assert same.stdout.strip() == str(len(targets)), same
