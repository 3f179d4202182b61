"""The Python end of `pingpong_python.cc`: answers N round trips the way a stub would,
through the socket (recvmsg_into/sendmsg) or a futex bell in a shared page (ctypes).

Usage (started by pingpong_python): pingpong_child.py SOCK_FD PAGE_FD socket|futex N
"""

from __future__ import annotations

import ctypes
import mmap
import socket
import sys

SYS_FUTEX = 202  # x86-64
FUTEX_WAIT, FUTEX_WAKE = 0, 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def main() -> None:
    sock_fd, page_fd, mode, rounds = sys.argv[1:5]
    sock = socket.socket(fileno=int(sock_fd))
    page = mmap.mmap(int(page_fd), 4096)
    view = memoryview(bytearray(256))
    if mode == "socket":
        for _ in range(int(rounds)):
            sock.recvmsg_into([view], 64)
            sock.sendmsg([view[:64]])
        return
    syscall = ctypes.CDLL(None).syscall
    down = ctypes.c_void_p(ctypes.addressof(ctypes.c_uint32.from_buffer(page, 0)))
    up = ctypes.c_void_p(ctypes.addressof(ctypes.c_uint32.from_buffer(page, 64)))
    words = memoryview(page).cast("I")
    timeout = _Timespec(1, 0)
    seen = 0
    for _ in range(int(rounds)):
        while words[0] == seen:
            syscall(
                SYS_FUTEX, down, FUTEX_WAIT, ctypes.c_uint32(seen), ctypes.byref(timeout), None, 0
            )
        seen = words[0]
        page[2048:2112] = page[128:192]  # read the request, write the reply
        words[16] = (words[16] + 1) & 0xFFFFFFFF
        syscall(SYS_FUTEX, up, FUTEX_WAKE, 1, None, None, 0)


if __name__ == "__main__":
    main()
