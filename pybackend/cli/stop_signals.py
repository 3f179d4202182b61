"""How the serving commands are stopped: Ctrl-C (SIGINT) and SIGTERM both end them cleanly."""

from __future__ import annotations

import signal
from types import FrameType


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread, so the command stops
    its servers and models on either. Installed even where SIGINT was ignored when the
    process started (a script's background job inherits that): the banner says Ctrl-C
    stops it, and tritonserver itself stops on SIGINT whatever it inherited."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_interrupt)
