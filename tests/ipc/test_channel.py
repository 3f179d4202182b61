"""SEQPACKET channels: framing, fd passing across processes, indirect bodies, EOF."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pybackend.ipc import codec
from pybackend.ipc.arena import Arena
from pybackend.ipc.channel import Channel, ChannelClosed
from pybackend.ipc.codec import ProtocolError
from pybackend.ipc.peer_segments import PeerSegments
from pybackend.ipc.protocol import FLAG_INDIRECT, HEADER, MAX_INLINE_BODY, MessageKind, Owner

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ca, cb = Channel(a), Channel(b)
    yield ca, cb
    ca.close()
    cb.close()


def test_messages_keep_their_boundaries(pair) -> None:
    a, b = pair
    a.send(MessageKind.LOG, b"one", 5)
    a.send(MessageKind.FINALIZE)
    a.send(MessageKind.SEND, b"x" * 1000, 2**64 - 1)
    # A body is a view of the receive buffer: read it before the next recv.
    m1 = b.recv()
    assert (m1.kind, bytes(m1.body), m1.id) == (MessageKind.LOG, b"one", 5)
    m2 = b.recv()
    assert (m2.kind, m2.body.nbytes) == (MessageKind.FINALIZE, 0)
    m3 = b.recv()
    assert (m3.id, m3.body.nbytes) == (2**64 - 1, 1000)
    assert a.sent == 3


def test_eof_is_seen_at_once(pair) -> None:
    a, b = pair
    a.sock.shutdown(socket.SHUT_RDWR)
    with pytest.raises(ChannelClosed):
        b.recv()


def test_bad_headers_are_protocol_errors(pair) -> None:
    a, b = pair
    a.sock.send(b"short")
    with pytest.raises(ProtocolError, match="shorter"):
        b.recv()
    a.sock.send(HEADER.pack(1, 0, 99, 0) + b"abc")
    with pytest.raises(ProtocolError, match="header says"):
        b.recv()


def test_large_bodies_travel_indirectly() -> None:
    s1, s2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fds: dict = {}
    own = Arena(
        Owner.STUB, 1 << 20, 1 << 20, lambda seg, size, fd: fds.__setitem__(seg, (size, os.dup(fd)))
    )
    peer = PeerSegments(wait_s=1)
    freed = []

    def out(body):
        mv = memoryview(body).cast("B")
        seg, off = own.alloc(mv.nbytes)
        own.write(seg, off, mv)
        return seg, off

    def inn(seg, off, n):
        freed.append((seg, off))
        return peer.get(seg, off, n)[off : off + n]

    sender, receiver = Channel(s1, indirect_out=out), Channel(s2, indirect_in=inn)
    try:
        body = bytes(range(256)) * (MAX_INLINE_BODY // 256 + 10)
        sender.send(MessageKind.EXECUTE, body, 3)
        for seg, (size, fd) in fds.items():
            peer.add(seg, size, fd)
        msg = receiver.recv()
        assert msg.flags & FLAG_INDIRECT
        assert bytes(msg.body) == body and msg.id == 3
        assert freed == [(0, 0)]
    finally:
        sender.close()
        receiver.close()
        peer.close()
        own.close()


def test_too_large_without_arena_is_refused(pair) -> None:
    a, _ = pair
    with pytest.raises(ProtocolError, match="larger"):
        a.send(MessageKind.EXECUTE, b"x" * (MAX_INLINE_BODY + 1))


CHILD = textwrap.dedent(
    """
    import os, socket, sys
    from pybackend.ipc import codec
    from pybackend.ipc.arena import Arena
    from pybackend.ipc.channel import Channel
    from pybackend.ipc.protocol import MessageKind, Owner

    ch = Channel(socket.socket(fileno=int(sys.argv[1])))
    def announce(seg, size, fd):
        ch.send(MessageKind.SEGMENT_ADD, codec.encode_segment_add(Owner.STUB, seg, size), fds=[fd])
    arena = Arena(Owner.STUB, 1 << 20, 1 << 20, announce)
    seg, off = arena.alloc(11)
    arena.write(seg, off, memoryview(b"hello child"))
    ch.send(MessageKind.LOG, codec.encode_free(Owner.STUB, [(seg, off)]))
    msg = ch.recv()  # wait for the parent's FREE, then exit
    owner, blocks = codec.decode_free(msg.body)
    for b in blocks:
        arena.decref(*b)
    print("used", arena.used_bytes, flush=True)
    """
)


def test_fd_passing_between_processes() -> None:
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(child_sock.fileno())],
        pass_fds=(child_sock.fileno(),),
        env=env,
        stdout=subprocess.PIPE,
    )
    child_sock.close()
    ch = Channel(parent_sock)
    peer = PeerSegments()
    try:
        add = ch.recv()
        assert add.kind == MessageKind.SEGMENT_ADD and len(add.fds) == 1
        owner, seg, size = codec.decode_segment_add(add.body)
        assert owner == Owner.STUB
        peer.add(seg, size, add.fds[0])
        ref = ch.recv()
        _, blocks = codec.decode_free(ref.body)
        ((seg, off),) = blocks
        assert bytes(peer.view(seg, off, 11)) == b"hello child"
        ch.send(MessageKind.FREE, codec.encode_free(Owner.STUB, blocks))
        out, _ = proc.communicate(timeout=30)
        assert out.strip() == b"used 0"
        assert proc.returncode == 0
        with pytest.raises(ChannelClosed):
            ch.recv()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        peer.close()
        ch.close()


def test_spinning_receive(pair) -> None:
    a, b = pair
    import threading
    import time

    t = threading.Timer(0.01, a.send, (MessageKind.LOG, b"late"))
    t.start()
    msg = b.recv(spin_s=1.0)
    assert bytes(msg.body) == b"late"
    t.join()
    t0 = time.perf_counter()
    threading.Timer(0.05, a.send, (MessageKind.LOG, b"after spin")).start()
    msg = b.recv(spin_s=0.001)  # spin ends, then blocks normally
    assert bytes(msg.body) == b"after spin" and time.perf_counter() - t0 >= 0.04
