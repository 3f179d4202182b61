"""``c_python_backend_utils``, the name of the original's C++ module, which model code
imports now and then (NVIDIA's qa restart model reads
``c_python_backend_utils.shared_memory.free_memory()``). The stub registers this module
under that name before it imports ``model.py``; its classes are pb_utils' own."""

from __future__ import annotations

from . import *  # noqa: F401,F403 - the names the original injects from it into pb_utils
from . import __all__ as _pb_names
from .transport import get_transport


class SharedMemory:
    """``c_python_backend_utils.shared_memory``."""

    def free_memory(self) -> int:
        """Free bytes of the shared memory this stub has mapped for tensors (0 outside a
        stub)."""
        return get_transport().free_memory()


shared_memory = SharedMemory()

__all__ = [*_pb_names, "SharedMemory", "shared_memory"]
