"""The stub's ledger: the one owner of the memory the stub and the backend lend each other,
and of the policy that decides when what the stub holds goes back (docs/protocol.md,
"Memory lifetimes", has the state diagrams).

Four lifetimes meet here:

* **A backend block the stub holds** (an input, a BLS output, an indirect message body).
  :meth:`Ledger.wrap` makes a tensor's array over it (an input, a BLS output) and
  :meth:`Ledger.track` ties it to the object every view of it keeps alive; when that dies,
  or at once through :meth:`Ledger.give_back`, it is *queued*. The queue goes home by one
  of three carriers, chosen here: the freed trailer of the RESULT the main thread is about to
  send (:meth:`Ledger.settle`), a FREE on sync just before that RESULT, or a FREE the reader
  thread sends (:meth:`Ledger.tick`: within FLUSH_S, at once past URGENT_FREE_BYTES).
* **One of our arena blocks lent to the backend** (an output, a BLS input, an indirect
  body). The Placer takes the arena reference where it places the tensor (the hot path
  stays in the arena); every reference comes back through here: the backend's FREE or
  EXECUTE's freed trailer (:meth:`Ledger.returned`), or the message was never sent
  (:meth:`Ledger.not_sent`).
* **A GPU hold** of one of our outputs (:meth:`Ledger.share_gpu`): returned by the backend
  as the block (GPU_HOLD_SEG, hold), so it rides the same two carriers as an arena block.
* **A mapping of the backend's GPU memory** (:meth:`Ledger.map_gpu`): a lent one is unmapped
  when its tensor dies and its hold queued like a backend block; Triton's pool stays mapped.

Threads: :meth:`give_back` runs in garbage-collector callbacks, on any thread and even
inside a send on this one, so it never sends: it appends to a deque, moves two counters and
at most writes one byte to the reader's wake-up pipe.
"""

from __future__ import annotations

import collections
import weakref
from typing import Callable, Deque, Dict, Iterable, List, Optional, Tuple, TypeVar

import numpy as np

from ..ipc import codec
from ..ipc.arena import IDLE_RELEASE_S, Arena
from ..ipc.channel import Channel
from ..ipc.codec import GpuRef, TensorDesc
from ..ipc.peer_segments import PeerSegments
from ..ipc.protocol import GPU_HOLD_SEG, MAX_INLINE_BODY, Location, MessageKind, Owner, ResultStatus
from ..utils.dlpack import DeviceBuffer
from .gpu import GpuHolds, GpuMappings

FREE_CHUNK = (MAX_INLINE_BODY - codec.FREE_HEAD.size) // codec.BLOCK_REF.size
URGENT_FREE_BYTES = 1 << 20  # queued backend blocks that are returned without batching
FLUSH_S = 0.05  # how long the reader lets small frees gather into one FREE

_OK = int(ResultStatus.OK)
_BACKEND_ARENA = int(Location.BACKEND_ARENA)
_GPU_IPC = int(Location.GPU_IPC)

Block = Tuple[int, int]
T = TypeVar("T")

_EMPTY = np.empty(0, np.uint8)


class _BlockRef(weakref.ref):
    """Weak reference to the owner of a backend block's views; it carries the block so
    the callback can return it (several times cheaper than weakref.finalize)."""

    __slots__ = ("seg", "off", "nbytes")
    seg: int
    off: int
    nbytes: int


class Ledger:
    def __init__(
        self,
        instance: str,
        peer: PeerSegments,
        async_: Channel,
        sync: Channel,
        wake_reader: Callable[[], None],
        warn: Callable[[str], None],
    ) -> None:
        self.instance = instance
        self.peer = peer
        self.arena: Optional[Arena] = None  # ours, from INIT on (StubState.make_arena)
        self._async = async_
        self._sync = sync
        self._wake = wake_reader
        self._warn = warn
        # Backend blocks waiting for a carrier, oldest first.
        self.queue: Deque[Block] = collections.deque()
        # Bytes queued since the last flush. Small blocks are batched (one FREE per FLUSH_S);
        # past URGENT_FREE_BYTES the reader flushes at once, so the backend reuses a big
        # block (hot in cache, no arena growth) for the next request instead of carving a
        # fresh one for each request of the next 50 ms.
        self.pending_bytes = 0
        self.urgent = False
        # The reader has a flush scheduled or is about to look: producers need not wake it.
        self.armed = False
        # Set by the main thread between the end of an execute and its RESULT: the batch's
        # inputs die as execute returns, and RESULT carries them (settle), so waking the
        # reader for them would only cost a thread switch.
        self.result_carries = False
        self._refs: Dict[int, _BlockRef] = {}
        self._on_dead = self._dead
        self.gpu_maps = GpuMappings(self.give_back_hold)
        self.gpu_holds = GpuHolds(warn, self.gpu_maps)

    # ------------------------------------------------------------------ backend blocks in

    def track(self, owner: object, seg: int, off: int, nbytes: int = 0) -> None:
        """Return block (seg, off) to the backend once ``owner`` (the object every view
        of the block keeps alive) is garbage-collected."""
        r = _BlockRef(owner, self._on_dead)
        r.seg = seg
        r.off = off
        r.nbytes = nbytes
        self._refs[id(r)] = r

    def wrap(self, seg: int, off: int, nbytes: int, make: Callable[[np.ndarray], T]) -> T:
        """What ``make`` builds (a tensor) over the backend block (seg, off) of ``nbytes``
        bytes, given as a uint8 array over the shared memory. The block goes back when the
        last view of that array dies, queued with its size (a big one goes back at once:
        URGENT_FREE_BYTES); an empty one goes back now. ProtocolError for a block outside
        the backend's segments. Should ``make`` raise, nothing is tracked: the caller
        returns the block (:meth:`give_back_unwrapped`)."""
        mm = self.peer.get(seg, off, nbytes)
        if not nbytes:
            made = make(_EMPTY)
            self.give_back(seg, off)
            return made
        buf = np.frombuffer(mm, np.uint8, nbytes, off)
        made = make(buf)
        # buf.base is a memoryview private to this block that every view of it keeps alive.
        self.track(buf.base, seg, off, nbytes)
        return made

    def _dead(self, r: _BlockRef) -> None:
        self._refs.pop(id(r), None)
        self.give_back(r.seg, r.off, r.nbytes)

    def give_back(self, seg: int, off: int, nbytes: int = 0) -> None:
        """Queue a backend block for its carrier; may run in any thread (a GC callback)."""
        self.queue.append((seg, off))
        if self.result_carries:
            return
        pending = self.pending_bytes + nbytes
        self.pending_bytes = pending
        if pending >= URGENT_FREE_BYTES and not self.urgent:
            self.urgent = True
            self._wake()
        elif not self.armed:
            self.armed = True
            self._wake()

    def give_back_hold(self, hold: int) -> None:
        """Queue the backend's GPU hold ``hold`` (memory it lent us for one tensor)."""
        self.give_back(GPU_HOLD_SEG, hold)

    def give_back_unwrapped(self, descs: Iterable[TensorDesc]) -> None:
        """The blocks and holds of tensors decoded but never wrapped (a failed batch or BLS
        response): nothing else will return them. A reference outside every known segment
        names no block, so there is nothing to return for it."""
        for td in descs:
            if td.location == _BACKEND_ARENA:
                if self.peer.contains(td.seg, td.offset, td.byte_size):
                    self.give_back(td.seg, td.offset)
            elif td.location == _GPU_IPC:
                hold = td.data.hold  # type: ignore[union-attr]
                if hold:
                    self.give_back_hold(hold)

    # ------------------------------------------------------------------ carriers

    def take(self, limit: int = FREE_CHUNK) -> List[Block]:
        """Up to ``limit`` queued backend blocks, taken off the queue (for a RESULT to
        carry, or a FREE)."""
        q = self.queue
        blocks: List[Block] = []
        try:
            while len(blocks) < limit:
                blocks.append(q.popleft())
        except IndexError:
            pass
        if not q:
            self.urgent = False
            self.pending_bytes = 0
        return blocks

    def flush(
        self, nonblocking: bool = False, channel: Optional[Channel] = None, ring: bool = True
    ) -> bool:
        """Send every queued backend block back with FREE (on ``channel``, by default the
        async one). Returns False when the socket was full (``nonblocking``): the rest
        stays queued for the next attempt. ``ring``: see :meth:`Channel.send`."""
        q = self.queue
        out = self._async if channel is None else channel
        self.urgent = False
        self.pending_bytes = 0
        while q:
            blocks = self.take()
            if not blocks:
                break
            try:
                out.send(
                    MessageKind.FREE,
                    codec.encode_free(Owner.BACKEND, blocks),
                    nonblocking=nonblocking,
                    ring=ring,
                )
            except BlockingIOError:
                q.extendleft(reversed(blocks))
                return False
            except OSError:
                return True  # the backend is gone: nothing to return the blocks to
        return True

    def result_follows(self) -> None:
        """The main thread is about to return from an execute: what dies now rides in its
        RESULT (:meth:`settle`)."""
        self.result_carries = True

    def settle(self, result: bytearray) -> None:
        """Give the queued blocks to the RESULT body ``result`` (the main thread, just
        before it sends it): the freed trailer of an OK result, and a FREE on sync for a
        failed batch or what one trailer does not hold. The backend frees trailer blocks
        once it has read the outputs (it pins the batch's inputs until then)."""
        if not self.result_carries:
            return
        self.result_carries = False
        if self.queue:
            if result[0] == _OK:
                # A FREE on the socket cost a sendmsg here and a recvmsg in the backend on
                # every request with an input in the arena (64 KiB identity: ~7 us, 5 %).
                codec.append_freed(result, self.take())
            if self.queue:
                # RESULT follows at once and rings the lane's bell: the backend wakes once
                # and reads both (a ring here cost a wake-up and a thread switch).
                self.flush(channel=self._sync, ring=False)

    def no_result(self) -> None:
        """The execute raised past the RESULT: what was queued for it is the reader's."""
        if self.result_carries:
            self.result_carries = False
            self._wake()

    def tick(self, now: float, flush_at: Optional[float]) -> Optional[float]:
        """The reader thread's turn after each wake-up: flush what is due, release our
        idle segments. Returns when the queue must next be flushed (None: nothing queued)."""
        if self.urgent:
            flush_at = now  # big blocks queued: the backend wants them back now
        if flush_at is not None and now >= flush_at:
            flush_at = None
            if not self.flush(nonblocking=True):
                flush_at = now + FLUSH_S  # the socket is full: retry soon
        if flush_at is None:
            # Disarm first, then look: a block queued after the look wakes the reader again;
            # one queued before it is seen now. While a flush is scheduled producers need
            # not wake it (the flush takes whatever is queued by then).
            self.armed = False
            if self.queue:
                self.armed = True
                flush_at = now + FLUSH_S
        if self.arena is not None:
            self.arena.release_idle(now)
        return flush_at

    def wait_ms(self, now: float, flush_at: Optional[float]) -> int:
        """How long the reader may sleep in poll (-1: until a message or a wake-up)."""
        if flush_at is not None:
            return max(0, int((flush_at - now) * 1000) + 1)
        if self.arena is not None and self.arena.has_idle_candidates():
            return int(IDLE_RELEASE_S * 250)
        return -1

    # ------------------------------------------------------------------ our blocks out

    def returned(self, blocks: List[Block]) -> None:
        """Our blocks and GPU holds the backend has finished with (a FREE, or EXECUTE's
        freed trailer). One we do not know is logged and skipped: the backend frees what a
        forged or broken RESULT named too, and that must not cost the other blocks."""
        if not blocks:
            return
        arena = self.arena
        if arena is None:
            raise codec.ProtocolError("the backend freed stub blocks before INIT")
        for seg, off in blocks:
            if seg == GPU_HOLD_SEG:  # a GPU output the backend has copied
                if not self.gpu_holds.release(off):
                    self._warn(
                        f"pybackend stub '{self.instance}': ignoring a free of GPU hold {off}"
                    )
                continue
            try:
                arena.decref(seg, off)
            except codec.ProtocolError as e:
                self._warn(f"pybackend stub '{self.instance}': ignoring a free: {e}")
        if arena.has_idle_candidates():
            self._wake()  # the reader times the release of idle segments

    def not_sent(self, blocks: List[Block], holds: List[int]) -> None:
        """References taken for a message that will not be sent (Placer.abort)."""
        arena = self.arena
        for seg, off in blocks:
            arena.decref(seg, off)  # type: ignore[union-attr]
        for hold in holds:
            self.gpu_holds.release(hold)

    # ------------------------------------------------------------------ GPU

    def share_gpu(self, buf: DeviceBuffer) -> Optional[GpuRef]:
        """Hold ``buf`` for the backend (until it returns (GPU_HOLD_SEG, hold)); None when
        CUDA IPC cannot share it: the caller stages it through the arena instead."""
        return self.gpu_holds.share(buf)

    def map_gpu(self, ref: GpuRef, nbytes: int) -> DeviceBuffer:
        """A DeviceBuffer over the backend's GPU memory that ``ref`` names. A lent one
        (``ref.hold``) goes back when the buffer dies; on failure the caller returns it."""
        return self.gpu_maps.buffer(ref, nbytes)
