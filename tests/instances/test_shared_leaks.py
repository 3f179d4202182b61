"""Loading and unloading a shared model 200 times leaves no process, file descriptor or
memory behind (issue 29): tritonserver's fd count and RSS after the cycles, against a
baseline taken after a warm-up (allocator pools and Triton's own caches settle first)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from instances_support import OP_IDENT, call, config, make_server, stub_processes

CYCLES = int(os.environ.get("PYBACKEND_TEST_SHARED_CYCLES", "200"))
WARMUP = 20
# Growth allowed for the server's heap over the cycles: a leak of one stub session, host or
# pipe reader per cycle (each holds a thread stack and buffers) would pass it many times over.
RSS_SLACK_KIB = 24 * 1024


def fd_targets(pid: int) -> list[str]:
    """What each open descriptor of ``pid`` names (a socket, a pipe, a memfd, a file)."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            pass
    return sorted(found)


def fds_settled(pid: int, at_most: int, timeout: float = 15.0) -> list[str]:
    """The server's descriptors once they are back to ``at_most`` (bounded wait). The last
    cycle's descriptors close on the backend's own threads after its stubs are gone (the
    monitor sees the exit, a reader thread ends), and a client connection may still be in
    tritonserver's hands: on a loaded machine that can take a moment. A leak per cycle
    (200 of them) never settles."""
    deadline = time.monotonic() + timeout
    while True:
        targets = fd_targets(pid)
        if len(targets) <= at_most or time.monotonic() > deadline:
            return targets
        time.sleep(0.1)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def no_stubs(server) -> bool:
    deadline = time.monotonic() + 30
    while stub_processes(server) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not stub_processes(server)


def cycle(client, server) -> None:
    client.load_model("ident", config=config("shared", 2))
    call(client, OP_IDENT)
    client.unload_model("ident")
    assert no_stubs(server)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_load_unload_cycles_leave_nothing_behind(tmp_path: Path):
    with make_server(tmp_path) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            for _ in range(WARMUP):
                cycle(client, server)
            before, rss_before = fd_targets(server.pid), rss_kib(server.pid)
            for _ in range(CYCLES):
                cycle(client, server)
            after = fds_settled(server.pid, len(before))
            rss_after = rss_kib(server.pid)
        finally:
            client.close()
    print(f"fds {len(before)} -> {len(after)}, RSS {rss_before} -> {rss_after} KiB")
    new = [t for t in after if t not in before or after.count(t) > before.count(t)]
    assert len(after) <= len(before), f"fds {len(before)} -> {len(after)}; new: {sorted(set(new))}"
    assert rss_after - rss_before < RSS_SLACK_KIB, (rss_before, rss_after)
