"""``c_python_backend_utils``, the name of the original's C++ module, which model code
imports now and then (NVIDIA's qa restart model reads
``c_python_backend_utils.shared_memory.free_memory()``). The stub registers this module
under that name before it imports ``model.py``; its classes are pb_utils' own."""

from __future__ import annotations

from typing import Any

from . import *  # noqa: F401,F403 - the names the original injects from it into pb_utils
from . import __all__ as _pb_names
from .metrics import MetricKind
from .transport import get_transport


class SharedMemory:
    """``c_python_backend_utils.shared_memory``."""

    def free_memory(self) -> int:
        """Free bytes of the shared memory this stub has mapped for tensors (0 outside a
        stub)."""
        return get_transport().free_memory()


shared_memory = SharedMemory()

# The original's module holds the metric kinds at its top level as well.
COUNTER, GAUGE, HISTOGRAM = MetricKind.COUNTER, MetricKind.GAUGE, MetricKind.HISTOGRAM


def __getattr__(name: str) -> Any:
    # The class of what exec(decoupled=True) returns, importable from here as from the
    # original's module; it lives with the stub's BLS calls, loaded only when asked for.
    if name == "ResponseIterator":
        from ..stub.response_iterator import ResponseIterator

        return ResponseIterator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    *_pb_names,
    "SharedMemory",
    "shared_memory",
    "COUNTER",
    "GAUGE",
    "HISTOGRAM",
    "ResponseIterator",  # noqa: F405 - served by __getattr__
]


def __dir__() -> list[str]:
    return sorted({*globals(), "ResponseIterator"})
