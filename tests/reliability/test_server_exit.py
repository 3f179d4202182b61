"""tritonserver stopped (SIGTERM) while a client keeps its HTTP connection open: the server
waits `--exit-timeout-secs`, logs `Exit timeout expired. Exiting immediately.` and calls
exit() with the models still loaded, so Triton's model-deleter threads finalize our
instances while exit() runs the library's static destructors. Process-wide maps of ours
(the BLS cycle registry) were destroyed under them: the server died of SIGSEGV or a malloc
abort (`malloc_consolidate(): invalid chunk size`), and after the abort hung in its signal
handler until SIGKILL. The original exits with code 1 there; so must we, stubs and all."""

from __future__ import annotations

import os
import signal
from typing import Any

from reliability_support import infer, start, stubs, wait_for

from pybackend.server.processes import alive


def test_sigterm_with_a_client_connected_exits_cleanly(http: Any) -> None:
    models = ["chaos", "chaos_decoupled", "bystander"]
    with start(models, extra_args=["--exit-timeout-secs=1"], stop_timeout=30) as server:
        pids = set(stubs(server).values())
        assert len(pids) == 4
        client = http(server)
        infer(client, "bystander", "ok")  # the client keeps this connection open
        os.kill(server.pid, signal.SIGTERM)
        wait_for("the server to exit", lambda: not alive(server.pid), timeout=20)
        log = server.log_text()
    assert "Exiting immediately" in log  # the path under test was taken
    for crash in ("Signal (11)", "Signal (6)", "malloc", "corrupted", "double free"):
        assert crash not in log, log[-3000:]
    assert server.returncode == 1, log[-3000:]
    assert not server.killed_stragglers
    assert not any(alive(p) for p in pids)
