"""The stub's side of the sync lane (csrc/ipc/lane.h): a shared page beside the sync socket
with a message slot, a futex doorbell and a count of socket messages per direction.

A round trip between two CPUs costs ~40 µs through the socket and ~24-29 µs through a
shared page and a futex on the machines we measure on, with a Python peer like this one
(benchmarks/pingpong). The backend sends EXECUTE in the "down" slot, we send RESULT in the
"up" slot; everything else stays on the socket, counted, and every send rings the
receiver's bell (a socket send right before a post may leave that to the post's ring), so
the receiver sleeps on the futex alone and reads the socket only when the count says a
message waits there (those first: they were sent before the slot's).

x86-64 only (the backend never offers a lane elsewhere): plain stores, whose order x86
keeps.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
from typing import Any, Optional, Tuple

BLOCK = 64 * 1024
HEAD = 64
SLOT = BLOCK - HEAD
_DOWN = 0  # backend -> stub
_UP = BLOCK  # stub -> backend
# u32 word indexes within the page
_D_BELL, _D_FULL, _D_KIND, _D_COUNT, _D_LEN = 0, 1, 2, 3, 6
_U_BELL, _U_FULL, _U_KIND, _U_COUNT, _U_LEN = (BLOCK // 4 + i for i in (0, 1, 2, 3, 6))
_ID_OFF = 16
_U64 = struct.Struct("<Q")

_SYS_FUTEX = 202  # x86-64
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long


class Lane:
    """Maps the page the backend sent with LANE (the fd is closed here)."""

    def __init__(self, fd: int) -> None:
        try:
            self._mm = mmap.mmap(fd, 2 * BLOCK)
        finally:
            os.close(fd)
        self._w = memoryview(self._mm).cast("I")
        self._down_bell = ctypes.c_void_p(
            ctypes.addressof(ctypes.c_uint32.from_buffer(self._mm, _DOWN))
        )
        self._up_bell = ctypes.c_void_p(
            ctypes.addressof(ctypes.c_uint32.from_buffer(self._mm, _UP))
        )
        self._ts = _Timespec(1, 0)
        self._ts_for = 1.0
        self._ts_ref = ctypes.byref(self._ts)
        self.socket_read = 0  # the backend's socket messages we have read
        # Imported here, not with the module: pybackend.utils is the whole pb_utils package,
        # which the stub has loaded by the time the backend sends LANE.
        from ..utils.native import helpers

        self._spin_c: Optional[Any] = helpers.pb_lane_spin if helpers is not None else None

    # ------------------------------------------------------------------ down (we read)

    def down_bell(self) -> int:
        return self._w[_D_BELL]

    def socket_pending(self) -> bool:
        return self._w[_D_COUNT] != self.socket_read

    def take(self) -> Optional[Tuple[int, int, memoryview]]:
        """(kind, id, body) from the down slot, or None when it is empty. The body is a
        view of the slot: the backend writes the next one only after our reply."""
        w = self._w
        if not w[_D_FULL]:
            return None
        kind = w[_D_KIND]
        (msg_id,) = _U64.unpack_from(self._mm, _DOWN + _ID_OFF)
        n = min(w[_D_LEN], SLOT)
        body = memoryview(self._mm)[_DOWN + HEAD : _DOWN + HEAD + n]
        w[_D_FULL] = 0
        return kind, msg_id, body

    def spin(self, seen: int, limit_s: float) -> bool:
        """Poll the down bell until it differs from ``seen`` (True) or ``limit_s`` passes
        (False), in C with the GIL released (csrc/stub_native/lane_spin.cc): a poll in Python
        would keep the stub's other threads waiting for the GIL. False at once where the
        native helpers are missing: the stub then sleeps at once, as without a spin."""
        if self._spin_c is None:
            return False
        return bool(self._spin_c(self._down_bell, seen, int(limit_s * 1e9)))

    def wait(self, seen: int, timeout_s: float) -> None:
        """Sleep (GIL released) until the down bell differs from ``seen`` or for at most
        ``timeout_s``."""
        # Arguments are prepared as little as possible: each ctypes conversion costs about
        # as much as the futex call itself (~0.5 us of a ~2 us call, per request).
        if timeout_s != self._ts_for:
            self._ts.tv_sec = int(timeout_s)
            self._ts.tv_nsec = int((timeout_s - int(timeout_s)) * 1e9)
            self._ts_for = timeout_s
        # As a C int (the kernel compares the low 32 bits): no c_uint32 object per call.
        _syscall(
            _SYS_FUTEX,
            self._down_bell,
            _FUTEX_WAIT,
            seen - 0x100000000 if seen > 0x7FFFFFFF else seen,
            self._ts_ref,
            None,
            0,
        )

    # ------------------------------------------------------------------ up (we write)

    def post(self, kind: int, msg_id: int, body: bytes | bytearray | memoryview) -> bool:
        """RESULT into the up slot, then ring. False when it does not fit or the backend has
        not taken the previous one (send it on the socket then)."""
        n = body.nbytes if isinstance(body, memoryview) else len(body)
        w = self._w
        if n > SLOT or w[_U_FULL]:
            return False
        self._mm[_UP + HEAD : _UP + HEAD + n] = body
        w[_U_KIND] = kind
        _U64.pack_into(self._mm, _UP + _ID_OFF, msg_id)
        w[_U_LEN] = n
        w[_U_FULL] = 1
        self._ring()
        return True

    def socket_sent(self, ring: bool = True) -> None:
        """Count a message that went out on the socket, then ring. ``ring=False`` when a
        ringing send follows at once (RESULT after the FREE of the batch's inputs): that
        ring covers both, and the backend wakes once instead of twice."""
        w = self._w
        w[_U_COUNT] = (w[_U_COUNT] + 1) & 0xFFFFFFFF
        if ring:
            self._ring()

    def _ring(self) -> None:
        w = self._w
        w[_U_BELL] = (w[_U_BELL] + 1) & 0xFFFFFFFF
        _syscall(_SYS_FUTEX, self._up_bell, _FUTEX_WAKE, 1, None, None, 0)
