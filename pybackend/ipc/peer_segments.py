"""The peer's shared-memory segments, which we only map (docs/protocol.md, "Tensor data
lives in memfd arenas"): the other side's arena announces each segment with its memfd, and
tensor references point into them by (segment, offset). Our own segments are arena.py's."""

from __future__ import annotations

import mmap
import os
import threading
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

from .arena import _base_address
from .codec import ProtocolError

PEER_WAIT_S = 5.0


class PeerSegments:
    """The peer's segments, mapped from the fds its SEGMENT_ADD messages carry."""

    def __init__(self, wait_s: float = PEER_WAIT_S) -> None:
        self.cond = threading.Condition()
        self.segments: Dict[int, Tuple[mmap.mmap, int, int]] = {}  # id -> (mm, size, base)
        self.wait_s = wait_s
        self._zombies: List[mmap.mmap] = []

    def add(self, seg_id: int, size: int, fd: int) -> None:
        try:
            actual = os.fstat(fd).st_size
            if actual < size:
                raise ProtocolError(
                    f"segment {seg_id} announced {size} bytes but the file has {actual}"
                )
            mm = mmap.mmap(fd, size) if size else None
        finally:
            os.close(fd)
        with self.cond:
            old = self.segments.pop(seg_id, None)
            if old is not None and old[0] is not None:
                self._close(old[0])
            base = _base_address(mm) if mm is not None else 0
            self.segments[seg_id] = (mm, size, base)  # type: ignore[assignment]
            self.cond.notify_all()

    def drop(self, seg_id: int) -> None:
        with self.cond:
            old = self.segments.pop(seg_id, None)
            if old is not None and old[0] is not None:
                self._close(old[0])
            self._zombies = [z for z in self._zombies if not self._try_close(z)]

    def _close(self, mm: mmap.mmap) -> None:
        if not self._try_close(mm):
            self._zombies.append(mm)

    @staticmethod
    def _try_close(mm: mmap.mmap) -> bool:
        try:
            mm.close()
            return True
        except BufferError:
            return False

    def get(self, seg_id: int, offset: int, length: int) -> mmap.mmap:
        """The mapping holding [offset, offset+length) of ``seg_id``, after bounds checks.
        An unknown id may be announced on the other channel: wait for it (bounded)."""
        entry = self.segments.get(seg_id)
        if entry is None:
            deadline = time.monotonic() + self.wait_s
            with self.cond:
                while (entry := self.segments.get(seg_id)) is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ProtocolError(
                            f"peer referenced segment {seg_id}, which was not announced "
                            f"within {self.wait_s:g} s"
                        )
                    self.cond.wait(left)
        mm, size, _ = entry
        if offset < 0 or length < 0 or offset + length > size:
            raise ProtocolError(
                f"peer block [{offset}, {offset + length}) is outside segment {seg_id} "
                f"of {size} bytes"
            )
        return mm

    def contains(self, seg_id: int, offset: int, length: int) -> bool:
        """Whether [offset, offset+length) lies in a known segment (no waiting)."""
        entry = self.segments.get(seg_id)
        return entry is not None and 0 <= offset and 0 <= length and offset + length <= entry[1]

    def view(self, seg_id: int, offset: int, length: int) -> np.ndarray:
        mm = self.get(seg_id, offset, length)
        if mm is None:
            return np.zeros(0, np.uint8)
        return np.frombuffer(mm, np.uint8, length, offset)

    def locate(self, addr: int, nbytes: int) -> Optional[Tuple[int, int]]:
        for seg_id, (_, size, base) in list(self.segments.items()):
            if base and base <= addr and addr + nbytes <= base + size:
                return seg_id, addr - base
        return None

    def close(self) -> None:
        with self.cond:
            for mm, _, _ in self.segments.values():
                if mm is not None:
                    self._close(mm)
            self.segments.clear()
