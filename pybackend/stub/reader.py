"""The async-channel reader thread: FREEs of our blocks, the backend's segments, RPC
replies; it also returns backend blocks (batched, within FLUSH_S), releases our idle
segments and sends queued one-way messages (SENDER_DROPPED, metric deletes)."""

from __future__ import annotations

import os
import select
import threading
import time

from ..ipc.arena import IDLE_RELEASE_S
from ..ipc.channel import ChannelClosed
from ..ipc.codec import ProtocolError
from .logging import WARNING
from .state import StubState

FLUSH_S = 0.05
EXIT_GRACE_S = 5.0


class Reader(threading.Thread):
    def __init__(self, state: StubState, exit_with_backend: bool = True) -> None:
        super().__init__(name="pybackend-async-reader", daemon=True)
        self.state = state
        # False in a process that serves models itself (attach mode): only this instance ends.
        self.exit_with_backend = exit_with_backend

    def run(self) -> None:
        st = self.state
        poller = select.poll()
        async_fd = st.async_.fileno()
        poller.register(async_fd, select.POLLIN)
        poller.register(st.wake_r, select.POLLIN)
        flush_at = None
        while True:
            now = time.monotonic()
            if flush_at is not None:
                timeout_ms = max(0, int((flush_at - now) * 1000) + 1)
            elif st.arena is not None and st.arena.has_idle_candidates():
                timeout_ms = int(IDLE_RELEASE_S * 250)
            else:
                timeout_ms = -1
            for fd, _ in poller.poll(timeout_ms):
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
            if st.free_urgent:
                flush_at = now  # big blocks queued: the backend wants them back now
            if flush_at is not None and now >= flush_at:
                flush_at = None
                if not st.flush_frees(nonblocking=True):
                    flush_at = now + FLUSH_S  # the socket is full: retry soon
            if flush_at is None:
                # Disarm first, then look: a FREE queued after the look wakes us again;
                # one queued before it is seen now. While a flush is scheduled producers
                # need not wake us (the flush takes whatever is queued by then).
                st.free_armed = False
                if st.backend_frees:
                    st.free_armed = True
                    flush_at = now + FLUSH_S
            if st.oneway and flush_at is None:
                flush_at = now + FLUSH_S  # the socket was full: retry soon
            if st.arena is not None:
                st.arena.release_idle(now)

    def _backend_gone(self) -> None:
        """The backend closed the async channel. The main thread normally sees EOF on
        sync at the same moment and exits; if model code keeps it busy, exit anyway."""
        self.state.fail_rpcs()
        if self.exit_with_backend:
            time.sleep(EXIT_GRACE_S)
            os._exit(1)
