"""In-process micro-measurements that need no server (UV-11: BYTES decoding)."""

from __future__ import annotations

import importlib.util
import timeit
from collections.abc import Callable
from functools import partial
from types import ModuleType

from benchmarks.payloads import serialize_strings, strings
from pybackend.server import locate


def _original_utils() -> ModuleType:
    """The original triton_python_backend_utils.py from the wheel (numpy and stdlib only)."""
    path = locate.original_backend_dir() / "python" / "triton_python_backend_utils.py"
    spec = importlib.util.spec_from_file_location("_original_pb_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _best_of_both(
    first: Callable[[bytes], object], second: Callable[[bytes], object], data: bytes, number: int
) -> tuple[float, float]:
    """Best time per call of each, their repeats interleaved: this machine has slow spells
    of seconds, and timing one after the other let a spell land on one side only."""
    timers = [timeit.Timer(partial(f, data)) for f in (first, second)]
    best = [float("inf"), float("inf")]
    for _ in range(7):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number) / number)
    return best[0], best[1]


def decode_speedup(
    count: int = 5000, width: int = 16, quick: bool = False, mixed: bool = False
) -> tuple[float | None, str]:
    """Python-loop decode time / our decode time for `count` strings, and a note.
    ``mixed``: lengths 0 .. width*2-1 in turn instead of all ``width`` long (text)."""
    if mixed:
        items = [(f"s{i:06d}-".encode() * width)[: i % (2 * width)] for i in range(count)]
        data = serialize_strings(items)
    else:
        data = strings("INPUT0", count, width).data
    try:
        reference = _original_utils().deserialize_bytes_tensor
    except (OSError, ImportError, AttributeError) as exc:
        return None, f"original pb_utils unavailable: {exc}"
    try:
        import triton_python_backend_utils as ours  # our drop-in module

        decode = ours.deserialize_bytes_tensor
    except (ImportError, AttributeError) as exc:
        return None, f"our deserialize_bytes_tensor unavailable: {exc}"
    number = 2 if quick else 20
    if list(decode(data)) != list(reference(data)):
        return None, "our deserialize_bytes_tensor decodes differently from the original"
    loop, fast = _best_of_both(reference, decode, data, number)
    return (
        loop / fast,
        f"Python loop {loop * 1e6:.0f} µs, ours {fast * 1e6:.0f} µs for {count} "
        f"{'strings of mixed lengths' if mixed else 'equally long strings'} "
        f"({loop / fast:.1f}x)",
    )


def encode_speedup(count: int = 100_000, width: int = 16, quick: bool = False) -> str:
    """The original's serialize_byte_tensor (a Python loop) against ours, for an object
    array of `count` strings of lengths 0 .. width*2-1 in turn (text): a note."""
    import numpy as np

    items = [(f"s{i:06d}-".encode() * width)[: i % (2 * width)] for i in range(count)]
    array = np.empty(count, dtype=object)
    array[:] = items
    try:
        reference = _original_utils().serialize_byte_tensor
        import triton_python_backend_utils as ours  # our drop-in module
    except (OSError, ImportError, AttributeError) as exc:
        return f"a serialize_byte_tensor is unavailable: {exc}"
    if ours.serialize_byte_tensor(array) != bytes(reference(array)):
        return "our serialize_byte_tensor encodes differently from the original"
    loop, fast = _best_of_both(reference, ours.serialize_byte_tensor, array, 1 if quick else 3)
    return (
        f"Python loop {loop * 1e3:.1f} ms, ours {fast * 1e3:.1f} ms to serialize {count} "
        f"strings of mixed lengths ({loop / fast:.1f}x)"
    )
