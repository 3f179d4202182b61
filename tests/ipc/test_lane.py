"""The stub's end of the sync lane (pybackend/ipc/lane.py) against the page as the backend
sees it: what a post, a counted socket send and a quiet count (no ring) change in the "up"
half, and what take() reads from the "down" half. The whole exchange with the real backend
runs in tests/backend/test_ipc_lane.py."""

from __future__ import annotations

import mmap
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from pybackend.ipc import lane as lane_mod
from pybackend.ipc.channel import Channel
from pybackend.ipc.lane import BLOCK, HEAD, Lane
from pybackend.utils import native

pytestmark = pytest.mark.skipif(
    os.uname().machine != "x86_64", reason="the lane exists on x86-64 only"
)

UP = BLOCK // 4  # u32 index of the up half
BELL, FULL, KIND, COUNT, LEN = 0, 1, 2, 3, 6


@pytest.fixture
def page() -> Iterator[tuple[Lane, memoryview]]:
    fd = os.memfd_create("test-lane")
    os.ftruncate(fd, 2 * BLOCK)
    backend_map = mmap.mmap(fd, 2 * BLOCK)
    lane = Lane(os.dup(fd))
    os.close(fd)
    words = memoryview(backend_map).cast("I")
    yield lane, words
    words.release()
    backend_map.close()


def test_post_fills_the_up_slot_and_rings(page: tuple[Lane, memoryview]) -> None:
    lane, w = page
    assert lane.post(5, 42, b"result-body")
    assert (w[UP + FULL], w[UP + KIND], w[UP + LEN], w[UP + BELL]) == (1, 5, 11, 1)
    assert not lane.post(5, 43, b"x")  # the backend has not taken the first one


def test_a_counted_socket_send_rings_unless_told_not_to(page: tuple[Lane, memoryview]) -> None:
    lane, w = page
    lane.socket_sent()
    assert (w[UP + COUNT], w[UP + BELL]) == (1, 1)
    lane.socket_sent(ring=False)  # a ringing send follows at once
    assert (w[UP + COUNT], w[UP + BELL]) == (2, 1)
    assert lane.post(5, 1, b"r")  # ...and this ring covers both
    assert (w[UP + COUNT], w[UP + BELL]) == (2, 2)


def test_channel_send_passes_ring_through(page: tuple[Lane, memoryview]) -> None:
    lane, w = page
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        ch = Channel(a)
        ch.lane = lane
        ch.send(18, b"free-body", ring=False)
        assert (w[UP + COUNT], w[UP + BELL]) == (1, 0)
        ch.send(18, b"free-body")
        assert (w[UP + COUNT], w[UP + BELL]) == (2, 1)
        assert len(b.recv(1024)) == len(b.recv(1024)) == 16 + 9  # header + body, twice
    finally:
        a.close()
        b.close()


def test_take_reads_the_down_slot_once(page: tuple[Lane, memoryview]) -> None:
    lane, w = page
    assert lane.take() is None
    body = b"execute-body"
    raw = memoryview(w.obj)  # the backend writes the down half
    raw[HEAD : HEAD + len(body)] = body
    struct.pack_into("<Q", raw, 16, 7)
    w[KIND], w[LEN], w[FULL] = 4, len(body), 1
    kind, msg_id, got = lane.take()  # type: ignore[misc]
    assert (kind, msg_id, bytes(got)) == (4, 7, body)
    assert w[FULL] == 0 and lane.take() is None
    assert lane_mod.SLOT == BLOCK - HEAD


@pytest.mark.parametrize("bell", [7, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF])
def test_wait_sleeps_while_the_bell_is_unchanged(page: tuple[Lane, memoryview], bell: int) -> None:
    """wait() passes the bell value as a C int: values past 2^31 must still compare equal
    in the kernel (the wait times out), and a different value must return at once."""
    lane, w = page
    w[0] = bell  # the down bell
    t0 = time.monotonic()
    lane.wait(bell, 0.05)
    slept = time.monotonic() - t0
    assert slept >= 0.04
    t0 = time.monotonic()
    lane.wait((bell + 1) & 0xFFFFFFFF, 0.5)
    assert time.monotonic() - t0 < 0.25
    t0 = time.monotonic()
    lane.wait(bell, 0.02)  # the timeout is re-read when it changes, not cached forever
    assert 0.015 <= time.monotonic() - t0 < 0.4  # not the 0.5 s of the call before


needs_native = pytest.mark.skipif(
    native.helpers is None, reason="the native helpers are not built (make build)"
)


@needs_native
@pytest.mark.parametrize("bell", [7, 0x80000000, 0xFFFFFFFF])
def test_spin_gives_up_on_a_quiet_bell_and_returns_on_a_ring(
    page: tuple[Lane, memoryview], bell: int
) -> None:
    lane, w = page
    w[0] = bell
    assert lane.spin(bell, 0.0002) is False
    assert lane.spin((bell + 1) & 0xFFFFFFFF, 30.0) is True  # moved already: at once
    ring = threading.Timer(0.01, w.__setitem__, (0, (bell + 1) & 0xFFFFFFFF))
    ring.start()
    assert lane.spin(bell, 30.0) is True  # bounded: a ring that never comes fails, not hangs
    ring.join()


@needs_native
def test_spin_releases_the_gil(page: tuple[Lane, memoryview]) -> None:
    """The ring comes from a thread that needs the GIL for Python work first: a poll that
    held the GIL would never see it and run out its 30 s."""
    lane, w = page

    def work_then_ring() -> None:
        total = 0
        for i in range(200_000):
            total += i
        w[0] = 1 if total else 2

    worker = threading.Thread(target=work_then_ring)
    worker.start()
    assert lane.spin(0, 30.0) is True
    worker.join()


def test_without_the_native_helpers_spin_returns_at_once(
    page: tuple[Lane, memoryview], monkeypatch: pytest.MonkeyPatch
) -> None:
    lane, w = page
    monkeypatch.setattr(lane, "_spin_c", None)  # as where libpybackend_native.so is missing
    w[0] = 3
    ring = threading.Timer(0.01, w.__setitem__, (0, 4))
    ring.start()
    assert lane.spin(3, 30.0) is False  # the stub then sleeps on the bell as before
    ring.join()


@pytest.mark.parametrize("spin_s", [0.0, 0.0001, 30.0])
def test_recv_takes_an_execute_posted_while_polling_or_asleep(
    page: tuple[Lane, memoryview], spin_s: float
) -> None:
    lane, w = page
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        ch = Channel(a)
        ch.lane = lane
        raw = memoryview(w.obj)

        def post() -> None:
            raw[HEAD : HEAD + 4] = b"exec"
            struct.pack_into("<Q", raw, 16, 9)
            w[KIND], w[LEN], w[FULL] = 4, 4, 1
            w[BELL] = (w[BELL] + 1) & 0xFFFFFFFF
            lane_mod._syscall(
                lane_mod._SYS_FUTEX, lane._down_bell, lane_mod._FUTEX_WAKE, 1, None, None, 0
            )

        poster = threading.Timer(0.01, post)
        poster.start()
        msg = ch.recv(spin_s)
        assert (msg.kind, msg.id, bytes(msg.body)) == (4, 9, b"exec")
        poster.join()
        del post, poster
        msg.body.release()
        raw.release()
    finally:
        a.close()
        b.close()
