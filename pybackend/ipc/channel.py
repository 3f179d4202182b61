"""One SOCK_SEQPACKET end: framing, fd passing and FLAG_INDIRECT bodies.

Sends may come from any thread (one lock, so a datagram and the ``sent`` counter that
RESULT's ``async_seq`` reports stay in step). Receives belong to one thread and land in
a reusable buffer: a received body is valid until that thread's next ``recv``.
"""

from __future__ import annotations

import array
import os
import socket
import threading
import time
from typing import Callable, List, Optional, Sequence

from ..utils import gpu_trace
from .codec import Buffer, ProtocolError, decode_indirect, encode_indirect
from .lane import Lane
from .protocol import FLAG_INDIRECT, HEADER, HEADER_SIZE, MAX_DATAGRAM, MAX_INLINE_BODY

MAX_FDS = 4
_ANC_SIZE = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
# Plain ints: socket's constants are enum.IntFlag members, and flag arithmetic on them
# costs about a microsecond per operation on the hot path.
_SOL_SOCKET = int(socket.SOL_SOCKET)
_SCM_RIGHTS = int(socket.SCM_RIGHTS)
_MSG_DONTWAIT = int(socket.MSG_DONTWAIT)
_MSG_TRUNCATED = int(socket.MSG_TRUNC) | int(socket.MSG_CTRUNC)
# Bodies up to this size are joined to their header and sent with send(); larger ones go
# as two pieces with sendmsg() (no copy).
_JOIN_MAX = 4096


class Message:
    __slots__ = ("kind", "flags", "id", "body", "fds")

    def __init__(
        self, kind: int, flags: int, msg_id: int, body: memoryview, fds: List[int]
    ) -> None:
        self.kind = kind
        self.flags = flags
        self.id = msg_id
        self.body = body
        self.fds = fds

    def __repr__(self) -> str:
        return f"Message(kind={self.kind}, id={self.id}, {self.body.nbytes}B, fds={self.fds})"


class ChannelClosed(ConnectionError):
    """The peer closed its end (it exited or died)."""


class Channel:
    """``indirect_out(body) -> (seg, offset)`` stores a too-large body in our arena;
    ``indirect_in(seg, offset, length) -> bytes`` reads one from the peer's arena and
    returns the block."""

    def __init__(
        self,
        sock: socket.socket,
        indirect_out: Optional[Callable[[Buffer], tuple]] = None,
        indirect_in: Optional[Callable[[int, int, int], bytes]] = None,
    ) -> None:
        self.sock = sock
        self.indirect_out = indirect_out
        self.indirect_in = indirect_in
        self._buf = bytearray(MAX_DATAGRAM)
        self._view = memoryview(self._buf)
        self._lock = threading.Lock()
        self.sent = 0  # datagrams sent so far (RESULT.async_seq)
        # The sync channel's shared-memory lane, once the backend sent LANE (lane.py).
        self.lane: Optional[Lane] = None

    @classmethod
    def from_fd(cls, fd: int, **kwargs: object) -> "Channel":
        return cls(socket.socket(fileno=fd), **kwargs)  # type: ignore[arg-type]

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    # ------------------------------------------------------------------ send

    def send(
        self,
        kind: int,
        body: Buffer = b"",
        msg_id: int = 0,
        fds: Sequence[int] = (),
        nonblocking: bool = False,
        ring: bool = True,
    ) -> int:
        """Send one message; returns the ``sent`` count including it. ``nonblocking``
        raises BlockingIOError instead of waiting for socket buffer space (for the thread
        that also reads this socket: it must never wait on a peer that waits on it).
        ``ring=False`` (sync lane only): count the message without waking the backend,
        because a send that rings follows at once (:meth:`Lane.socket_sent`)."""
        n = body.nbytes if isinstance(body, memoryview) else len(body)
        flags = 0
        if n > MAX_INLINE_BODY:
            if self.indirect_out is None:
                raise ProtocolError(f"message body of {n} bytes is larger than {MAX_INLINE_BODY}")
            seg, off = self.indirect_out(body)
            body = encode_indirect(seg, off, n)
            n = len(body)
            flags = FLAG_INDIRECT
        header = HEADER.pack(kind, flags, n, msg_id)
        with self._lock:
            try:
                if fds or n > _JOIN_MAX:
                    anc = [(_SOL_SOCKET, _SCM_RIGHTS, array.array("i", fds))] if fds else []
                    self.sock.sendmsg(
                        [header, body] if n else [header],
                        anc,
                        _MSG_DONTWAIT if nonblocking else 0,
                    )
                else:
                    # One joined buffer: send() of a small datagram costs ~0.5 us less
                    # than sendmsg() of two pieces (a SEND per streamed response).
                    self.sock.send(header + body, _MSG_DONTWAIT if nonblocking else 0)
            except (BrokenPipeError, ConnectionResetError) as e:
                raise ChannelClosed(str(e)) from None
            self.sent += 1
            if self.lane is not None:
                self.lane.socket_sent(ring)  # the backend sleeps on the lane's bell
            return self.sent

    def send_fast(self, kind: int, body: Buffer, msg_id: int = 0) -> None:
        """Through the lane's slot when there is one and the body fits (RESULT), else as
        :meth:`send`."""
        lane = self.lane
        if lane is not None:
            with self._lock:
                if lane.post(kind, msg_id, body):
                    return
        self.send(kind, body, msg_id)

    # ------------------------------------------------------------------ receive

    def recv(self, spin_s: float = 0.0) -> Message:
        """Block for the next message. Raises :class:`ChannelClosed` on EOF.

        ``spin_s`` > 0 polls without sleeping for that long first: a message that arrives
        meanwhile costs no wake-up of this thread (tens of µs on VMs), at the price of
        burning CPU while waiting. The backend decides it (csrc/backend/lane_spin.h)."""
        got: Optional[tuple]
        try:
            if self.lane is not None:
                from_lane = self._recv_lane(self.lane, spin_s)
                if isinstance(from_lane, Message):
                    return from_lane
                got = from_lane
            elif spin_s > 0.0:
                got = self._spin(spin_s)
                if got is None:
                    got = self.sock.recvmsg_into([self._view], _ANC_SIZE)
            else:
                got = self.sock.recvmsg_into([self._view], _ANC_SIZE)
        except ConnectionResetError as e:
            raise ChannelClosed(str(e)) from None
        nbytes, anc, mflags, _ = got
        fds: List[int] = []
        for level, ctype, data in anc:
            if level == _SOL_SOCKET and ctype == _SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(data[: len(data) - len(data) % a.itemsize])
                fds.extend(a)
        if nbytes == 0:
            for fd in fds:
                os.close(fd)
            raise ChannelClosed("peer closed the channel")
        if mflags & _MSG_TRUNCATED:
            for fd in fds:
                os.close(fd)
            raise ProtocolError("received a truncated datagram or too many file descriptors")
        if nbytes < HEADER_SIZE:
            raise ProtocolError(
                f"datagram of {nbytes} bytes is shorter than the {HEADER_SIZE}-byte header"
            )
        kind, flags, body_len, msg_id = HEADER.unpack_from(self._buf, 0)
        if body_len != nbytes - HEADER_SIZE:
            raise ProtocolError(
                f"header says {body_len} body bytes, datagram carries {nbytes - HEADER_SIZE}"
            )
        body = self._view[HEADER_SIZE:nbytes]
        if flags & FLAG_INDIRECT:
            if self.indirect_in is None:
                raise ProtocolError("indirect body received but no peer arena is attached")
            seg, off, length = decode_indirect(body)
            body = memoryview(self.indirect_in(seg, off, length))
        return Message(kind, flags, msg_id, body, fds)

    def _recv_lane(self, lane: Lane, spin_s: float) -> "tuple | Message":
        """A counted socket message first, then the slot, else poll the bell for up to
        ``spin_s`` (once per call), else sleep on it. Every second without a message the
        socket is read too: that is how EOF (the backend went away) is seen."""
        while True:
            seen = lane.down_bell()
            if lane.socket_pending():
                lane.socket_read += 1
                return self.sock.recvmsg_into([self._view], _ANC_SIZE)
            slot = lane.take()
            if slot is not None:
                kind, msg_id, body = slot
                return Message(kind, 0, msg_id, body, [])
            if spin_s > 0.0:
                spun = lane.spin(seen, spin_s)
                spin_s = 0.0
                if spun:
                    continue
            if gpu_trace.ON:  # each sleep is one event: the wake-ups a request pays
                t0 = gpu_trace.now()
            lane.wait(seen, 1.0)
            if gpu_trace.ON:
                gpu_trace.record("lane.sleep", t0)
            if lane.down_bell() == seen:
                try:
                    raw = self.sock.recvmsg_into([self._view], _ANC_SIZE, _MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                lane.socket_read += 1  # every socket message is counted, this one too
                return raw

    def _spin(self, spin_s: float) -> Optional[tuple]:
        deadline = time.perf_counter() + spin_s
        recv = self.sock.recvmsg_into
        view = [self._view]
        while True:
            try:
                return recv(view, _ANC_SIZE, _MSG_DONTWAIT)
            except BlockingIOError:
                if time.perf_counter() >= deadline:
                    return None
