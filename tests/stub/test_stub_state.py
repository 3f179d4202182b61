"""In-process checks of the stub's shared state: the reader thread never waits on a full
socket (FREE batching and the carriers of backend blocks: test_ledger.py)."""

from __future__ import annotations

import socket
import time

import pytest

from pybackend.ipc.arena import Arena
from pybackend.ipc.protocol import MessageKind
from pybackend.stub.state import StubState


@pytest.fixture()
def state():
    sync_peer, sync_stub = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    async_peer, async_stub = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    st = StubState(sync_stub.detach(), async_stub.detach(), "unit_0")
    yield st, sync_peer, async_peer
    st.close()
    sync_peer.close()
    async_peer.close()


def fill(sock_owner_channel) -> int:
    n = 0
    while True:
        try:
            sock_owner_channel.send(MessageKind.LOG, b"x" * 4000, nonblocking=True)
        except BlockingIOError:
            return n
        n += 1


def test_idle_segment_is_kept_when_drop_cannot_be_sent(state) -> None:
    st, _, _ = state
    arena: Arena = st.make_arena(1 << 16, 1 << 16)
    a = arena.alloc(1 << 16)
    b = arena.alloc(1 << 16)
    arena.decref(*a)
    arena.decref(*b)
    fill(st.async_)
    assert arena.release_idle(time.monotonic() + 5) == []
    assert 1 in arena.segments
