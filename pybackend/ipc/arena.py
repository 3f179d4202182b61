"""Shared-memory arenas: the segments we own and allocate from (docs/protocol.md, "Tensor
data lives in memfd arenas").

The peer's segments, which we only map, are pybackend/ipc/peer_segments.py's.

Our arena is a list of memfd segments with a first-fit allocator (64-byte aligned,
coalescing free list). Blocks are reference counted so one block can be referenced by
several in-flight messages and by local numpy views at the same time; it returns to the
free list when the last reference is dropped. Segments other than the first are
released after they stayed empty for ``IDLE_RELEASE_S``, or at once when an allocation at
``max_size`` needs their room.
"""

from __future__ import annotations

import bisect
import mmap
import os
import threading
import time
import weakref
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from ..errors import PybackendError
from .codec import ProtocolError
from .headroom import headroom_error

ALIGN = 64
IDLE_RELEASE_S = 1.0
PAGE = mmap.PAGESIZE
#: The original's text when its shared-memory pool cannot grow (spec 7, shared memory);
#: NVIDIA's qa test_growth_error looks for it. Ours says why after it.
GROWTH_FAILED = "Failed to increase the shared memory pool size to"


def _growth_failed(total: int) -> str:
    """The start of every growth error (csrc/ipc/arena.cc GrowthFailed)."""
    return f"{GROWTH_FAILED} {total} bytes: "


def _align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) & ~(a - 1)


class ArenaError(PybackendError, MemoryError):
    """Shared memory could not be reserved (the system is out of memory or tmpfs space).
    Still a MemoryError: what reserves memory for a tensor (the stub's BLS calls, model code
    that makes tensors) catches running out of shared memory as it catches running out of
    memory."""


class _OverBound(ArenaError):
    """The block does not fit under ``max_size`` now; it may once blocks come back."""


#: How long an allocation over ``max_size`` waits for blocks lent to the peer to come back
#: (the backend returns what it has copied within its 50 ms tick) before it fails.
BOUND_WAIT_S = 2.0


def create_segment_fd(size: int) -> int:
    """An anonymous, private, fully reserved shared-memory file of ``size`` bytes.

    memfd first; where it is missing, a random-named file in /dev/shm created with
    O_EXCL and mode 0600 and unlinked at once, so nothing is ever left behind.
    ``posix_fallocate`` reserves the pages now, so running out of memory is an error
    here instead of a SIGBUS on first touch.
    """
    refused = headroom_error(size)  # a memfd's fallocate beyond free memory OOM-kills
    if refused is not None:
        raise ArenaError(refused)
    fd = -1
    try:
        fd = os.memfd_create("pybackend", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        fd = -1
    if fd < 0:
        for _ in range(8):
            path = f"/dev/shm/pybackend-{os.urandom(16).hex()}"  # (secrets: 4 ms of import)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
            os.unlink(path)
            break
        if fd < 0:
            raise ArenaError("could not create a shared-memory segment in /dev/shm")
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as e:
            if e.errno in (95, 22):  # EOPNOTSUPP / EINVAL: filesystem without fallocate
                os.ftruncate(fd, size)
            else:
                raise
    except OSError as e:
        os.close(fd)
        raise ArenaError(
            f"could not reserve {size} bytes of shared memory for tensors: {e.strerror or e}"
        ) from None
    return fd


def _base_address(mm: mmap.mmap) -> int:
    probe = np.frombuffer(mm, np.uint8, 1)
    addr = probe.__array_interface__["data"][0]
    del probe
    return addr


def array_address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _LocalRef(weakref.ref):
    """Watches the buffer of an ``empty_array`` array; ``seg``/``off`` name its block."""

    __slots__ = ("seg", "off")
    seg: int
    off: int


class Segment:
    __slots__ = ("id", "size", "mm", "base", "free", "blocks", "starts", "used", "empty_since")

    def __init__(self, seg_id: int, size: int, mm: mmap.mmap) -> None:
        self.id = seg_id
        self.size = size
        self.mm = mm
        self.base = _base_address(mm)
        # Free extents sorted by offset: parallel lists of offsets and sizes.
        self.free: List[List[int]] = [[0, size]]
        self.blocks: Dict[int, List[int]] = {}  # start -> [size, refcount]
        self.starts: List[int] = []  # sorted block starts (for interior lookups)
        self.used = 0
        self.empty_since = time.monotonic()


class Arena:
    """The arena this process owns. ``announce(seg_id, size, fd)`` is called (outside the
    lock) for every new segment and must send SEGMENT_ADD; it may close the fd after."""

    def __init__(
        self,
        owner: int,
        default_size: int = 1 << 20,
        growth_size: int = 1 << 20,
        announce: Optional[Callable[[int, int, int], None]] = None,
        drop: Optional[Callable[[int], Optional[bool]]] = None,
        max_size: int = 0,
        knob: str = "",
    ) -> None:
        self.owner = owner
        self.default_size = max(_align(default_size, PAGE), PAGE)
        self.growth_size = max(_align(growth_size, PAGE), PAGE)
        #: Bound on the bytes all segments together reserve (0: none); ``knob`` names the
        #: setting in the error an allocation beyond it raises.
        self.max_size = max_size
        self.knob = knob
        self.announce = announce
        self.drop = drop
        self.lock = threading.Lock()
        self.grow_lock = threading.Lock()
        #: Signalled by decref while an allocation over the bound waits (``_waiters``).
        self._freed = threading.Condition(self.lock)
        self._waiters = 0
        self.segments: Dict[int, Segment] = {}
        self._next_id = 0
        self._local_refs: Dict[int, _LocalRef] = {}  # arrays of empty_array, while alive

    # ------------------------------------------------------------------ segments

    def _new_segment(self, need: int) -> Segment:
        """Create, map and announce a segment. Called with ``grow_lock`` held but not
        ``lock``: announcing sends a message, and a sender must never block while
        holding the lock the reader thread needs to process FREEs."""
        size = self.default_size if self._next_id == 0 else self.growth_size
        size = max(size, _align(need, PAGE))
        segs = tuple(self.segments.values())
        reserved = sum(s.size for s in segs)
        state = (
            f"{reserved} bytes already reserved in {len(segs)} segment(s), "
            f"{sum(s.used for s in segs)} in use"
        )
        if self.max_size and reserved + size > self.max_size:
            # Growth beyond the bound: a smaller segment still does if it holds the block.
            room = max(0, self.max_size - reserved) // PAGE * PAGE
            if room < _align(need, PAGE):
                raise _OverBound(
                    _growth_failed(reserved + size)
                    + f"a block of {need} bytes does not fit under the shared-memory limit of "
                    f"{self.max_size} bytes ({state}); raise {self.knob or 'the limit'} or "
                    "return smaller tensors"
                )
            size = room
        try:
            fd = create_segment_fd(size)
        except ArenaError as e:
            bound = ""
            if self.knob:
                bound = (
                    f"; {self.knob} bounds it to {self.max_size}"
                    if self.max_size
                    else f"; {self.knob} can bound it"
                )
            raise ArenaError(
                _growth_failed(reserved + size) + f"{e}; this arena has {state}{bound}"
            ) from None
        try:
            mm = mmap.mmap(fd, size)
            seg = Segment(self._next_id, size, mm)
            self._next_id += 1
            if self.announce is not None:
                self.announce(seg.id, size, fd)
        finally:
            os.close(fd)
        return seg

    def release_idle(self, now: Optional[float] = None, at_once: bool = False) -> List[int]:
        """Drop segments (other than the first) that stayed empty for IDLE_RELEASE_S, or
        every empty one ``at_once`` (an allocation at the bound needs their room)."""
        now = time.monotonic() if now is None else now
        dropped = []
        with self.lock:
            for seg in list(self.segments.values()):
                idle = at_once or now - seg.empty_since >= IDLE_RELEASE_S
                if self._floor(seg) or seg.used or not idle:
                    continue
                del self.segments[seg.id]
                dropped.append(seg)
        released = []
        for seg in dropped:
            if self.drop is not None and self.drop(seg.id) is False:
                with self.lock:  # could not tell the peer now: keep it, try again later
                    self.segments[seg.id] = seg
                continue
            released.append(seg.id)
            try:
                seg.mm.close()
            except BufferError:
                pass  # a stray view still exists; the mapping goes when it does
        return released

    def has_idle_candidates(self) -> bool:
        return any(not self._floor(s) and not s.used for s in tuple(self.segments.values()))

    def _floor(self, seg: Segment) -> bool:
        """The first segment stays as the arena's floor, unless a large first block made it
        bigger than that floor (then it goes like any other, so a burst leaves nothing)."""
        return seg.id == 0 and seg.size <= self.default_size

    def close(self) -> None:
        with self.lock:
            segs = list(self.segments.values())
            self.segments.clear()
        for seg in segs:
            try:
                seg.mm.close()
            except BufferError:
                pass

    # ------------------------------------------------------------------ blocks

    def alloc(self, nbytes: int) -> Tuple[int, int]:
        """Reserve ``nbytes`` (refcount 1). Returns (seg, offset).

        Over ``max_size``, while blocks are in use (most are lent to the peer: a decoupled
        model's earlier responses, which the backend returns once it has copied them), waits
        up to ``BOUND_WAIT_S`` for them to come back instead of failing at once: a stream of
        responses that each fit is not an error because it is produced faster than the
        backend's tick."""
        size = _align(max(nbytes, 1))
        with self.lock:
            hit = self._take_any(size)
        if hit is not None:
            return hit
        deadline = 0.0
        while True:
            with self.grow_lock:
                with self.lock:
                    hit = self._take_any(size)  # another thread may have grown meanwhile
                if hit is not None:
                    return hit
                try:
                    seg = self._new_segment(size)
                except _OverBound as e:
                    over: Optional[_OverBound] = e
                else:
                    over = None
                    with self.lock:
                        self.segments[seg.id] = seg
                        off = self._take(seg, size)
            if over is None:
                break
            if self.release_idle(at_once=True):
                continue  # empty segments went: their room may hold it
            # Not under grow_lock: the thread that returns blocks must never wait for it.
            now = time.monotonic()
            deadline = deadline or now + BOUND_WAIT_S
            with self.lock:
                in_use = sum(seg.used for seg in self.segments.values())
                if now >= deadline or size > self.max_size or in_use == 0:
                    waited = f" (after waiting {BOUND_WAIT_S:g} s for blocks in use to come back)"
                    raise ArenaError(f"{over}{waited if now >= deadline else ''}") from None
                self._waiters += 1
                try:
                    self._freed.wait(deadline - now)
                finally:
                    self._waiters -= 1
        assert off is not None
        return seg.id, off

    def _take_any(self, size: int) -> Optional[Tuple[int, int]]:
        for seg in self.segments.values():
            off = self._take(seg, size)
            if off is not None:
                return seg.id, off
        return None

    def _take(self, seg: Segment, size: int) -> Optional[int]:
        free = seg.free
        for i, ext in enumerate(free):
            if ext[1] >= size:
                off = ext[0]
                if ext[1] == size:
                    del free[i]
                else:
                    ext[0] += size
                    ext[1] -= size
                seg.blocks[off] = [size, 1]
                bisect.insort(seg.starts, off)
                seg.used += size
                return off
        return None

    def _find_block(self, seg: Segment, offset: int) -> Optional[int]:
        if offset in seg.blocks:
            return offset
        i = bisect.bisect_right(seg.starts, offset) - 1
        if i >= 0:
            start = seg.starts[i]
            if offset < start + seg.blocks[start][0]:
                return start
        return None

    def incref(self, seg_id: int, offset: int) -> None:
        with self.lock:
            seg = self.segments[seg_id]
            start = self._find_block(seg, offset)
            if start is None:
                raise ProtocolError(f"no allocated block at segment {seg_id} offset {offset}")
            seg.blocks[start][1] += 1

    def decref(self, seg_id: int, offset: int) -> None:
        """Drop one reference (a FREE from the peer, or a local view that died)."""
        with self.lock:
            seg = self.segments.get(seg_id)
            if seg is None:
                raise ProtocolError(f"FREE for unknown segment {seg_id}")
            start = self._find_block(seg, offset)
            if start is None:
                raise ProtocolError(
                    f"FREE for unallocated block at segment {seg_id} offset {offset}"
                )
            blk = seg.blocks[start]
            blk[1] -= 1
            if blk[1] > 0:
                return
            del seg.blocks[start]
            del seg.starts[bisect.bisect_left(seg.starts, start)]
            seg.used -= blk[0]
            if seg.used == 0:
                seg.empty_since = time.monotonic()
            self._give_back(seg, start, blk[0])
            if self._waiters:
                self._freed.notify_all()

    def _give_back(self, seg: Segment, off: int, size: int) -> None:
        free = seg.free
        i = bisect.bisect_left(free, [off, 0])
        # Coalesce with the following and the preceding extent.
        if i < len(free) and free[i][0] == off + size:
            size += free[i][1]
            del free[i]
        if i > 0 and free[i - 1][0] + free[i - 1][1] == off:
            free[i - 1][1] += size
        else:
            free.insert(i, [off, size])

    # ------------------------------------------------------------------ access

    def buffer(self, seg_id: int, offset: int, nbytes: int) -> np.ndarray:
        """A writable uint8 view of our own memory (no reference counting)."""
        seg = self.segments[seg_id]
        return np.frombuffer(seg.mm, np.uint8, nbytes, offset)

    def write(self, seg_id: int, offset: int, data: memoryview) -> None:
        seg = self.segments[seg_id]
        seg.mm[offset : offset + data.nbytes] = data

    def locate(self, addr: int, nbytes: int) -> Optional[Tuple[int, int]]:
        """(seg, offset) when [addr, addr+nbytes) lies in one of our segments."""
        for seg in tuple(self.segments.values()):
            if seg.base <= addr and addr + nbytes <= seg.base + seg.size:
                return seg.id, addr - seg.base
        return None

    def empty_array(self, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An array in shared memory: returning it as an output costs no stub-side copy.
        ``shape``: a tuple of non-negative ints."""
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize
        for d in shape:  # np.prod costs ~3 µs here, as much as the allocation
            nbytes *= d
        seg_id, off = self.alloc(nbytes)
        blk = np.frombuffer(self.segments[seg_id].mm, np.uint8, nbytes, off)
        # blk.base is private to this block and every view of the array keeps it alive:
        # its death returns the block. A weakref callback, not weakref.finalize (whose
        # registry costs several µs per array, and which also runs at exit).
        r = _LocalRef(blk.base, self._on_local_dead)
        r.seg = seg_id
        r.off = off
        self._local_refs[id(r)] = r
        return blk.view(dtype).reshape(shape)

    def _on_local_dead(self, r: "_LocalRef") -> None:
        self._local_refs.pop(id(r), None)
        self._release_local(r.seg, r.off)

    def _release_local(self, seg_id: int, off: int) -> None:
        try:
            self.decref(seg_id, off)
        except (ProtocolError, KeyError):
            pass

    @property
    def total_size(self) -> int:
        return sum(s.size for s in self.segments.values())

    @property
    def used_bytes(self) -> int:
        return sum(s.used for s in self.segments.values())
