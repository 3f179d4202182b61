"""The shared-memory arena: allocation, coalescing, growth, idle release, peer mapping."""

from __future__ import annotations

import gc
import os
import threading
import time

import numpy as np
import pytest

from pybackend.ipc import arena as arena_mod
from pybackend.ipc.arena import ALIGN, Arena, create_segment_fd
from pybackend.ipc.codec import ProtocolError
from pybackend.ipc.peer_segments import PeerSegments

MB = 1 << 20


class Announcer:
    def __init__(self) -> None:
        self.added: list = []
        self.dropped: list = []
        self.fds: dict = {}

    def announce(self, seg: int, size: int, fd: int) -> None:
        self.added.append((seg, size))
        self.fds[seg] = os.dup(fd)

    def drop(self, seg: int) -> None:
        self.dropped.append(seg)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


@pytest.fixture()
def ann():
    a = Announcer()
    yield a
    a.close()


@pytest.fixture()
def arena(ann: Announcer):
    a = Arena(2, MB, MB, ann.announce, ann.drop)
    yield a
    a.close()


def test_first_segment_is_lazy_and_announced(arena: Arena, ann: Announcer) -> None:
    assert ann.added == []
    seg, off = arena.alloc(100)
    assert (seg, off) == (0, 0)
    assert ann.added == [(0, MB)]


def test_blocks_are_aligned_and_disjoint(arena: Arena) -> None:
    blocks = [arena.alloc(n) for n in (1, 63, 64, 65, 1000, 0)]
    offs = [off for _, off in blocks]
    assert all(off % ALIGN == 0 for off in offs)
    assert len(set(offs)) == len(offs)
    assert offs == sorted(offs)


def test_free_coalesces_back_to_one_extent(arena: Arena) -> None:
    blocks = [arena.alloc(100) for _ in range(10)]
    for seg, off in blocks[::2] + blocks[1::2]:
        arena.decref(seg, off)
    seg0 = arena.segments[0]
    assert seg0.free == [[0, MB]]
    assert seg0.used == 0 and arena.used_bytes == 0


def test_first_fit_reuses_freed_space(arena: Arena) -> None:
    a = arena.alloc(128)
    b = arena.alloc(128)
    arena.decref(*a)
    assert arena.alloc(64) == a
    assert b[1] == 128


def test_growth_creates_new_segments_and_big_ones(arena: Arena, ann: Announcer) -> None:
    arena.alloc(MB - 64)
    seg, off = arena.alloc(4096)
    assert seg == 1 and off == 0
    seg, off = arena.alloc(3 * MB + 1)
    assert seg == 2
    assert ann.added[2][1] >= 3 * MB + 1
    assert arena.total_size == ann.added[0][1] + ann.added[1][1] + ann.added[2][1]


def test_refcount_and_interior_offsets(arena: Arena) -> None:
    seg, off = arena.alloc(4096)
    arena.incref(seg, off + 100)  # a reference to the middle of the block
    arena.decref(seg, off + 200)
    assert arena.used_bytes == 4096
    arena.decref(seg, off)
    assert arena.used_bytes == 0
    with pytest.raises(ProtocolError):
        arena.decref(seg, off)
    with pytest.raises(ProtocolError):
        arena.decref(99, 0)


def test_idle_segments_are_released_but_not_the_first(
    arena: Arena, ann: Announcer, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = arena.alloc(MB)
    b = arena.alloc(MB)
    arena.decref(*a)
    arena.decref(*b)
    assert arena.has_idle_candidates()
    assert arena.release_idle() == []  # not idle long enough yet
    assert arena.release_idle(time.monotonic() + 2) == [1]
    assert ann.dropped == [1]
    assert list(arena.segments) == [0]


def test_write_and_locate(arena: Arena) -> None:
    seg, off = arena.alloc(16)
    arena.write(seg, off, memoryview(b"0123456789abcdef"))
    view = arena.buffer(seg, off, 16)
    assert bytes(view) == b"0123456789abcdef"
    addr = view.__array_interface__["data"][0]
    assert arena.locate(addr + 4, 8) == (seg, off + 4)
    assert arena.locate(addr, 2 * MB) is None
    assert arena.locate(id(view), 1) is None


def test_empty_array_is_refcounted_by_its_views(arena: Arena) -> None:
    a = arena.empty_array((4, 4), np.float32)
    a[:] = 1
    used = arena.used_bytes
    assert used >= 64
    view = a[1:]
    del a
    gc.collect()
    assert arena.used_bytes == used
    del view
    gc.collect()
    assert arena.used_bytes == 0


def test_concurrent_alloc_free(arena: Arena) -> None:
    errors = []

    def work() -> None:
        try:
            for i in range(300):
                b = arena.alloc(1000 + i)
                arena.decref(*b)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and arena.used_bytes == 0


def test_segment_fd_is_reserved_and_private() -> None:
    fd = create_segment_fd(MB)
    try:
        assert os.fstat(fd).st_size == MB
        assert os.fstat(fd).st_blocks * 512 >= MB  # pages reserved up front
        target = os.readlink(f"/proc/self/fd/{fd}")
        assert target.startswith("/memfd:") or "(deleted)" in target
    finally:
        os.close(fd)


def test_fallback_without_memfd_leaves_nothing_in_dev_shm(monkeypatch: pytest.MonkeyPatch) -> None:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    before = set(os.listdir("/dev/shm"))
    monkeypatch.delattr(os, "memfd_create")
    fd = create_segment_fd(64 * 1024)
    try:
        assert set(os.listdir("/dev/shm")) == before
        assert os.fstat(fd).st_mode & 0o777 == 0o600
        assert "(deleted)" in os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def test_reservation_failure_is_an_arena_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, off: int, size: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(arena_mod.os, "posix_fallocate", no_space)
    with pytest.raises(arena_mod.ArenaError, match="could not reserve"):
        create_segment_fd(MB)


def test_growth_beyond_the_bound_says_the_originals_text(ann: Announcer) -> None:
    """The original's words for a pool that cannot grow (NVIDIA's qa test_growth_error
    looks for them), with the size it would have reached, then why and what to change."""
    bounded = Arena(2, MB, MB, ann.announce, ann.drop, max_size=2 * MB, knob="KNOB")
    try:
        bounded.alloc(MB)
        with pytest.raises(arena_mod.ArenaError) as caught:
            bounded.alloc(2 * MB)
        message = str(caught.value)
        assert message.startswith("Failed to increase the shared memory pool size to ")
        assert "does not fit under the shared-memory limit of 2097152 bytes" in message
        assert "raise KNOB" in message
    finally:
        bounded.close()


def test_empty_segments_go_at_once_at_the_bound(ann: Announcer) -> None:
    """A block that needs the room of empty segments gets it at once, not after their idle
    time (csrc/ipc/arena.cc does the same): nothing is in use to wait for."""
    bounded = Arena(2, MB, MB, ann.announce, ann.drop, max_size=3 * MB, knob="KNOB")
    try:
        blocks = [bounded.alloc(MB) for _ in range(3)]  # one segment each
        for seg, off in blocks[1:]:
            bounded.decref(seg, off)
        seg, _ = bounded.alloc(2 * MB)
        assert ann.dropped == [1, 2] and seg == 3
        assert bounded.total_size == 3 * MB
    finally:
        bounded.close()


# ---------------------------------------------------------------------------- peer side


def test_peer_maps_bounds_checks_and_drops(arena: Arena, ann: Announcer) -> None:
    seg, off = arena.alloc(64)
    arena.write(seg, off, memoryview(b"x" * 64))
    peer = PeerSegments(wait_s=0.2)
    try:
        peer.add(seg, ann.added[0][1], os.dup(ann.fds[seg]))
        assert bytes(peer.view(seg, off, 64)) == b"x" * 64
        with pytest.raises(ProtocolError, match="outside"):
            peer.get(seg, MB - 8, 16)
        with pytest.raises(ProtocolError, match="outside"):
            peer.get(seg, -1, 1)
        with pytest.raises(ProtocolError, match="not announced"):
            peer.get(7, 0, 1)
        v = peer.view(seg, off, 64)
        addr = v.__array_interface__["data"][0]
        assert peer.locate(addr, 64) == (seg, off)
        peer.drop(seg)  # v still views it: the unmap waits for the view
        assert bytes(v) == b"x" * 64
        del v
        peer.drop(seg)
        assert peer.segments == {}
    finally:
        peer.close()


def test_peer_waits_for_a_late_segment(arena: Arena, ann: Announcer) -> None:
    arena.alloc(8)
    peer = PeerSegments(wait_s=5)
    fd = os.dup(ann.fds[0])
    timer = threading.Timer(0.1, peer.add, (0, MB, fd))
    timer.start()
    try:
        t0 = time.monotonic()
        peer.get(0, 0, 8)
        assert time.monotonic() - t0 < 4
    finally:
        timer.join()
        peer.close()


def test_peer_rejects_short_files() -> None:
    fd = create_segment_fd(4096)
    peer = PeerSegments()
    with pytest.raises(ProtocolError, match="announced"):
        peer.add(0, MB, fd)
    peer.close()
