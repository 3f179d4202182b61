"""``python -m pybackend.stub --instance NAME``: started by the backend with the sync and
async channels on fds 3 and 4 (docs/protocol.md, "Start")."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys


def _close_inherited_fds(keep_up_to: int) -> None:
    """Close every inherited fd above the channels, so the stub holds nothing of the
    server's (listening sockets, other stubs' channels)."""
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        os.closerange(keep_up_to + 1, 65536)
        return
    for fd in fds:
        if fd > keep_up_to:
            try:
                os.close(fd)
            except OSError:
                pass


def main(argv: list) -> None:
    # Triton handles Ctrl-C for the whole process group; the backend stops us itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A crash in native code (SIGSEGV, SIGBUS, SIGFPE, SIGABRT) prints the Python stack of
    # the crashing thread to stderr, whose last lines the backend puts into the error of
    # every request the stub held. Only that thread: the tail it keeps is 20 lines.
    faulthandler.enable(file=sys.stderr, all_threads=False)
    sync_fd = int(os.environ.get("PYBACKEND_SYNC_FD", "3"))
    async_fd = int(os.environ.get("PYBACKEND_ASYNC_FD", "4"))
    _close_inherited_fds(max(sync_fd, async_fd, 4))

    import argparse

    parser = argparse.ArgumentParser(prog="python -m pybackend.stub")
    parser.add_argument("--instance", default=os.environ.get("PYBACKEND_INSTANCE", "stub"))
    args = parser.parse_args(argv)

    from .main import run

    run(sync_fd, async_fd, args.instance)


if __name__ == "__main__":
    main(sys.argv[1:])
