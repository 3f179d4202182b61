"""SIGTERM and SIGINT sent to a stub are ignored, as the original's stub ignores them.

Both reach a stub when they are sent to every process of the server, as systemd stops a
service (KillMode=control-group), or to the stub itself (Ctrl-C and a signal to the server's
process group do not: the backend starts each stub in a process group of its own).
tritonserver then shuts down gracefully (waits for requests in flight, unloads every model)
and tells each stub when to finalize and exit; a stub that died on the signal would fail its
requests in flight and never run `finalize`. The original installs a handler that does
nothing (Python's `signal.getsignal` shows None there); ours is a Python handler that does
nothing, set to restart interrupted system calls as the original's (a C `signal()`) does.

A handler, not SIG_IGN: an ignored disposition is inherited across exec, so every program
a model starts (`subprocess`) would ignore Ctrl-C and `terminate()` too; a handled one goes
back to the default at exec, as in the original. A process that model.py forks (not exec)
inherits the handler: SIGINT stays ignored there as in the original, SIGTERM goes back to
the default (:func:`default_term_in_forked_child`), so `multiprocessing.Process.terminate()`
stops a forked worker (on the original it is ignored and `join()` waits for good:
docs/compatibility.md).
"""

from __future__ import annotations

import signal
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _ignored(signum: int, frame: Any) -> None:
    """Nothing: tritonserver stops the stub itself (FINALIZE, or its end seen on the channel)."""


def ignore() -> None:
    """In the stub's main thread, before the model is imported."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _ignored)
        signal.siginterrupt(sig, False)


def default_term_in_forked_child() -> None:
    """In a process model.py forked from a stub (the fork hook, fork_route.py)."""
    if signal.getsignal(signal.SIGTERM) is _ignored:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
