"""The floor of the GPU identity (issue 31): its two device-to-device copies measured alone,
in the benchmark's process, through the driver (ctypes on libcuda.so.1, no toolkit).

    python -m benchmarks.gpu_copy_floor [--bytes 67108864 4096] [--reps 50]

For each size, on device 0's primary context, medians over ``reps`` rounds of:

  two_dtod           cuMemcpyDtoD a->b then b->c, then a sync of the default stream they ran
                     on (a device-to-device cuMemcpyDtoD returns before the copy is done:
                     CUDA's "API synchronization behavior"): the issue's yardstick
  two_async_synced   cuMemcpyDtoDAsync + cuStreamSynchronize, twice: what the backend does
                     (the input into lent memory, the output into Triton's buffer)
  two_async_one_sync both copies queued, one cuStreamSynchronize
  idle_sync          cuStreamSynchronize of an idle stream: the fixed cost of one host sync

Without a GPU (no libcuda.so.1, or no device) it says "no GPU" and measures nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from typing import Any, Callable, Optional

LIBRARY = "libcuda.so.1"
_u64 = ctypes.c_uint64
_ptr = ctypes.c_void_p


class _Cuda:
    def __init__(self, library: str) -> None:
        self.lib = ctypes.CDLL(library)

    def __call__(self, name: str, *args: Any) -> None:
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} failed with CUDA error {rc}")


def _median_us(fn: Callable[[], None], reps: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000


def gpu_missing(library: str = LIBRARY) -> Optional[str]:
    """Why the floor cannot be measured here, or None."""
    try:
        cu = _Cuda(library)
        cu("cuInit", ctypes.c_uint(0))
        count = ctypes.c_int()
        cu("cuDeviceGetCount", ctypes.byref(count))
    except (OSError, RuntimeError, AttributeError) as e:
        return f"{type(e).__name__}: {e}"
    return None if count.value > 0 else "no CUDA device"


def _measure_size(cu: _Cuda, stream: Any, size: int, reps: int, warmup: int) -> dict:
    bufs = [_u64() for _ in range(3)]
    for buf in bufs:
        cu("cuMemAlloc_v2", ctypes.byref(buf), ctypes.c_size_t(size))
    a, b, c = (x.value for x in bufs)
    n = ctypes.c_size_t(size)

    def sync() -> None:
        cu("cuStreamSynchronize", stream)

    def dtod(dst: int, src: int) -> None:
        cu("cuMemcpyDtoD_v2", _u64(dst), _u64(src), n)

    def queue(dst: int, src: int) -> None:
        cu("cuMemcpyDtoDAsync_v2", _u64(dst), _u64(src), n, stream)

    def two_dtod() -> None:
        dtod(b, a)
        dtod(c, b)
        cu("cuStreamSynchronize", _ptr(0))  # the legacy default stream: the copies are done

    def two_async_synced() -> None:
        queue(b, a)
        sync()
        queue(c, b)
        sync()

    def two_async_one_sync() -> None:
        queue(b, a)
        queue(c, b)
        sync()

    try:
        return {
            "two_dtod": _median_us(two_dtod, reps, warmup),
            "two_async_synced": _median_us(two_async_synced, reps, warmup),
            "two_async_one_sync": _median_us(two_async_one_sync, reps, warmup),
            "idle_sync": _median_us(sync, reps, warmup),
        }
    finally:
        for buf in bufs:
            cu("cuMemFree_v2", buf)


def measure(sizes: list[int], reps: int = 50, warmup: int = 5, library: str = LIBRARY) -> dict:
    """{size: {variant: median µs}} on device 0, or {"error": why} without a GPU."""
    missing = gpu_missing(library)
    if missing:
        return {"error": f"no GPU: {missing}"}
    cu = _Cuda(library)
    dev = ctypes.c_int()
    cu("cuDeviceGet", ctypes.byref(dev), 0)
    ctx = _ptr()
    cu("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    cu("cuCtxPushCurrent_v2", ctx)
    stream = _ptr()
    results: dict = {}
    try:
        cu("cuStreamCreate", ctypes.byref(stream), ctypes.c_uint(1))  # non-blocking
        for size in sizes:
            results[size] = _measure_size(cu, stream, size, reps, warmup)
    finally:
        popped = _ptr()
        cu("cuCtxPopCurrent_v2", ctypes.byref(popped))
    return results


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, nargs="+", default=[64 << 20, 4096])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--library", default=LIBRARY, help="the driver library (tests: a fake)")
    args = parser.parse_args(argv)
    results = measure(args.bytes, args.reps, library=args.library)
    if "error" in results:
        print(f"gpu_copy_floor: {results['error']}; nothing measured")
        return 0
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
