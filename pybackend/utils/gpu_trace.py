"""Opt-in stage timers for the GPU path, the stub's half (docs/gpu.md, "Where the time goes").

With ``PYBACKEND_GPU_TRACE=<file>`` in tritonserver's environment (the stub inherits it) the
stub appends one line per timed stage, ``pbtrace stub <stage> <ns>``, to ``<file>``, next to
the backend's ``pbtrace backend ...`` lines (csrc/cuda/trace.h);
``benchmarks/gpu_identity.py --breakdown`` aggregates both. Unset (the default), a timed spot
costs one test of :data:`ON`, a module constant::

    if gpu_trace.ON:
        t0 = gpu_trace.now()
    ...
    if gpu_trace.ON:
        gpu_trace.record("map.open", t0)

Each line goes out in one ``os.write`` on a file opened with O_APPEND, so lines of the
backend, the stub and other stubs never interleave within a line.
"""

from __future__ import annotations

import os
import time
from typing import Optional

ENV = "PYBACKEND_GPU_TRACE"
PATH: Optional[str] = os.environ.get(ENV) or None
ON = PATH is not None
now = time.perf_counter_ns

_fd: Optional[int] = None


def record(stage: str, t0: int, end: Optional[int] = None) -> None:
    """Record ``stage`` as the time from ``t0`` (a :func:`now`) to ``end`` (default now);
    ``t0 == end`` for an event without a duration (a cache hit). Never raises: tracing must
    not fail a request."""
    global _fd
    ns = (now() if end is None else end) - t0
    try:
        if _fd is None:
            _fd = os.open(PATH or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(_fd, f"pbtrace stub {stage} {ns}\n".encode())
    except OSError:
        pass


def count(stage: str) -> None:
    """An event without a duration (recorded as 0 ns)."""
    t = now()
    record(stage, t, t)
