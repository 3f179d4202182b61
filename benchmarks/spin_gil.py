"""What the stub's spin costs the stub's other Python threads (docs/protocol.md "The spin").

While the main thread waits for EXECUTE, a thread of the model (a response sender, an
asyncio loop, a BLS caller) may need the GIL. This runs such a thread (a Python counting
loop) for ``--seconds`` while the main thread waits on a lane's bell that never rings, in
100 µs calls, three ways: asleep on the futex (no spin), polling in C through ctypes (the
stub's spin: the GIL is released for the call), and polling in Python (what the spin must
not be: the GIL is held between switch intervals). Prints the counting thread's rate in each
as a share of the first, and how late a thread that wakes every millisecond gets to run.

    python -m benchmarks.spin_gil [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import mmap
import os
import threading
import time
from collections.abc import Callable

from pybackend.ipc.lane import BLOCK, Lane


def rate_while(wait: Callable[[], object], seconds: float) -> float:
    """Counts per second of a Python loop in a second thread while ``wait`` runs in a loop."""
    stop = threading.Event()
    count = [0]

    def counter() -> None:
        n = 0
        while not stop.is_set():
            n += 1
        count[0] = n

    t = threading.Thread(target=counter)
    t.start()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        wait()
    stop.set()
    t.join()
    return count[0] / seconds


def lateness_while(wait: Callable[[], object], wakes: int) -> tuple[float, float]:
    """Median and worst µs a thread that sleeps 1 ms at a time runs late (its wake-up plus
    the wait for the GIL) while ``wait`` runs in a loop."""
    late: list[float] = []
    done = threading.Event()

    def sleeper() -> None:
        for _ in range(wakes):
            t = time.perf_counter()
            time.sleep(0.001)
            late.append((time.perf_counter() - t - 0.001) * 1e6)
        done.set()

    t = threading.Thread(target=sleeper)
    t.start()
    while not done.is_set():
        wait()
    t.join()
    late.sort()
    return late[len(late) // 2], late[-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.spin_gil", description=__doc__)
    p.add_argument("--seconds", type=float, default=1.0)
    args = p.parse_args(argv)
    fd = os.memfd_create("spin-gil")
    os.ftruncate(fd, 2 * BLOCK)
    page = mmap.mmap(fd, 2 * BLOCK)
    lane = Lane(os.dup(fd))
    os.close(fd)
    words = memoryview(page).cast("I")
    limit = 100e-6

    def python_poll() -> None:
        end = time.perf_counter() + limit
        while words[0] == 0 and time.perf_counter() < end:
            pass

    modes = {
        "asleep on the futex (no spin)": lambda: lane.wait(0, limit),
        "polling in C, GIL released (the stub's spin)": lambda: lane.spin(0, limit),
        "polling in Python, GIL held": python_poll,
    }
    base = None
    print(f"cores: {len(os.sched_getaffinity(0))}, load average: {os.getloadavg()[0]:.2f}")
    for name, wait in modes.items():
        r = rate_while(wait, args.seconds)
        base = base or r
        mid, worst = lateness_while(wait, 300)
        print(
            f"{name}: a counting thread at {r / 1e6:.2f} M loops/s ({r / base:.2f}x); "
            f"a thread waking every 1 ms late by {mid:.0f} µs median, {worst:.0f} µs worst"
        )
    words.release()
    page.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
