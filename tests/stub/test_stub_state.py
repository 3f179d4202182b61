"""In-process checks of the stub's shared state: FREE batching and the reader thread never
waiting on a full socket."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from pybackend.ipc import codec
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


def test_free_blocks_are_batched(state) -> None:
    st, _, async_peer = state
    for i in range(5):
        st.free_backend_block(0, i * 64)
    assert st.flush_frees()
    data = async_peer.recv(65536)
    owner, blocks = codec.decode_free(memoryview(data)[16:])
    assert owner == 1 and blocks == [(0, i * 64) for i in range(5)]


def test_flush_keeps_blocks_when_the_socket_is_full(state) -> None:
    st, _, async_peer = state
    assert fill(st.async_) > 0
    st.free_backend_block(3, 128)
    st.free_backend_block(3, 256)
    assert st.flush_frees(nonblocking=True) is False
    assert list(st.backend_frees) == [(3, 128), (3, 256)]
    async_peer.setblocking(False)
    try:
        while True:
            async_peer.recv(65536)
    except BlockingIOError:
        pass
    assert st.flush_frees(nonblocking=True) is True
    assert not st.backend_frees


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


def test_input_blocks_are_returned_when_their_views_die(state) -> None:
    st, _, _ = state
    owner = np.frombuffer(bytearray(64), np.uint8)
    view = owner[8:].view(np.float32)
    st.track_backend_block(owner.base, 2, 640)
    del owner
    assert not st.backend_frees
    del view
    assert list(st.backend_frees) == [(2, 640)]
