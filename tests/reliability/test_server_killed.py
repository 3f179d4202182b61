"""UV-02: after kill -9 of the server, its stubs go by themselves (EOF on their channels;
a stopped one gets SIGHUP+SIGCONT from the kernel as an orphaned process group) and
nothing of ours is left: no process, no /dev/shm file (memfd segments die with the last
process that maps them)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from reliability_support import infer, start, stubs, wait_for

from integration_support.leaks import ORIGINAL_SHM_LEAK, shm_files
from pybackend.server.processes import alive

#: A stub busy in execute notices the dead server on its reader thread and waits this
#: long (pybackend.stub.reader.EXIT_GRACE_S) for execute before it exits anyway.
BUSY_STUB_GRACE_S = 1.0


def test_stubs_go_with_a_killed_server(tmp_path: Path) -> None:
    before_shm = shm_files()
    server = start(["chaos", "chaos_decoupled", "big_identity"])
    with server:
        found = stubs(server)
        assert len(found) == 4
        marker = tmp_path / "busy"

        def busy() -> None:
            import tritonclient.http as httpclient

            client = httpclient.InferenceServerClient(server.http_url)
            try:
                infer(client, "chaos", f"block:{marker}")
            except Exception:  # noqa: BLE001 - the server dies under it
                pass
            finally:
                client.close()

        thread = threading.Thread(target=busy, daemon=True)
        thread.start()
        wait_for("execute to start", marker.exists)
        stopped = found["chaos_decoupled_0_0"]
        os.kill(stopped, signal.SIGSTOP)  # a stopped stub
        # SIGSTOP takes effect when the stub is next scheduled: kill the server only once it
        # has, or the kernel's orphaned-group check (at the server's exit) finds nothing
        # stopped and the stub stops afterwards, with no SIGCONT ever coming. The check looks
        # for a completed group stop, which needs every thread (the reader too), not only
        # the main thread that /proc/<pid>/stat shows.
        wait_for("every thread of the stub to stop", lambda: _all_threads_stopped(stopped))
        os.kill(server.pid, signal.SIGKILL)
        t0 = time.monotonic()
        try:
            wait_for(
                "every stub to exit",
                lambda: not any(alive(p) for p in found.values()),
                timeout=BUSY_STUB_GRACE_S + 10,
            )
        except AssertionError as e:
            left = {n: _thread_states(p) for n, p in found.items() if alive(p)}
            raise AssertionError(f"{e}; left (thread states): {left}") from None
        gone_in = time.monotonic() - t0
    assert not server.killed_stragglers, "the launcher had to kill stubs"
    assert not {n for n in shm_files() - before_shm if not ORIGINAL_SHM_LEAK.match(n)}
    print(f"all {len(found)} stubs gone {gone_in:.1f} s after kill -9 of the server")


def _thread_states(pid: int) -> str:
    """The state letters of every thread of pid (from /proc/<pid>/task/*/stat)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass  # the thread ended meanwhile
    return "".join(sorted(states))


def _all_threads_stopped(pid: int) -> bool:
    states = _thread_states(pid)
    return bool(states) and set(states) == {"T"}
