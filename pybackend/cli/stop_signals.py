"""How the serving commands are stopped: Ctrl-C (SIGINT) and SIGTERM both end them cleanly."""

from __future__ import annotations

import signal
import time
from types import FrameType

#: Longest a stop signal waits to be acted on (see :func:`wait_for_stop`).
POLL_S = 0.5


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread, so the command stops
    its servers and models on either. Installed even where SIGINT was ignored when the
    process started (a script's background job inherits that): the banner says Ctrl-C
    stops it, and tritonserver itself stops on SIGINT whatever it inherited."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_interrupt)


def wait_for_stop() -> None:
    """Blocks until SIGINT or SIGTERM (KeyboardInterrupt, see :func:`stop_on_signals`).

    In short sleeps, not one long one: the kernel may deliver a signal sent to the process to
    any of its threads (gRPC's own threads among them), and then Python's handler waits for
    the main thread's next step: a main thread asleep for an hour took SIGTERM up to an hour
    late (`pybackend openai` after requests through gRPC: a loop of stops hung within 4)."""
    while True:
        time.sleep(POLL_S)
