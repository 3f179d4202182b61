"""The async-channel reader thread: FREEs of our blocks, the backend's segments, RPC
replies; it also gives the ledger its turns (backend blocks returned within FLUSH_S, our
idle segments released: stub/ledger.py) and sends queued one-way messages (SENDER_DROPPED,
metric deletes)."""

from __future__ import annotations

import os
import select
import threading
import time

from ..ipc.channel import ChannelClosed
from ..ipc.codec import ProtocolError
from .ledger import FLUSH_S
from .logging import WARNING
from .state import StubState

# How long a stub whose backend is gone waits for model code busy in execute (the main thread
# sees EOF on sync once execute returns, and exits cleanly) before exiting anyway. Nothing can
# receive that execute's result; a stub outliving its server holds memory (a GPU's, too) that a
# supervisor restarting the server at once needs back. The original's stub goes within ~1.5 s.
EXIT_GRACE_S = 1.0


class Reader(threading.Thread):
    def __init__(self, state: StubState, exit_with_backend: bool = True) -> None:
        super().__init__(name="pybackend-async-reader", daemon=True)
        self.state = state
        # False in a process that serves models itself (attach mode): only this instance ends.
        self.exit_with_backend = exit_with_backend

    def run(self) -> None:
        st = self.state
        ledger = st.ledger
        poller = select.poll()
        async_fd = st.async_.fileno()
        poller.register(async_fd, select.POLLIN)
        poller.register(st.wake_r, select.POLLIN)
        flush_at = None
        while True:
            for fd, _ in poller.poll(ledger.wait_ms(time.monotonic(), flush_at)):
                if fd == async_fd:
                    try:
                        msg = st.async_.recv()
                    except ChannelClosed:
                        self._backend_gone()
                        return
                    except ProtocolError as e:
                        st.log.here(
                            WARNING, f"pybackend stub '{st.instance}': bad async message: {e}"
                        )
                        continue
                    if not st.handle_common(msg):
                        st.log.here(
                            WARNING,
                            f"pybackend stub '{st.instance}': unexpected async message kind "
                            f"{msg.kind}",
                        )
                elif fd == st.wake_r:
                    try:
                        os.read(st.wake_r, 4096)
                    except BlockingIOError:
                        pass
            if st.oneway:
                st.flush_oneway(nonblocking=True)  # what does not fit is retried below
            now = time.monotonic()
            flush_at = ledger.tick(now, flush_at)
            if st.oneway and flush_at is None:
                flush_at = now + FLUSH_S  # the socket was full: retry soon

    def _backend_gone(self) -> None:
        """The backend closed the async channel. The main thread normally sees EOF on
        sync at the same moment and exits; if model code keeps it busy, exit anyway."""
        self.state.fail_rpcs()
        if self.exit_with_backend:
            time.sleep(EXIT_GRACE_S)
            os._exit(1)
