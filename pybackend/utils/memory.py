"""``PreferredMemory`` for BLS requests. pb_utils' memory-type numbers are its own
(GPU=0, CPU=1), not the C ``TRITONSERVER_MemoryType`` values."""

from __future__ import annotations

from .arguments import as_instance, as_int
from .pybind_enum import PybindEnum


class MemoryType(PybindEnum):
    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1
    DEFAULT = 2  # internal: keep the callee's own preference


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU


class PreferredMemory:
    """Where a BLS callee should put its outputs."""

    __slots__ = ("preferred_memory_type", "preferred_device_id")

    def __init__(
        self, preferred_memory_type: MemoryType = MemoryType.DEFAULT, preferred_device_id: int = 0
    ) -> None:
        self.preferred_memory_type = as_instance(
            preferred_memory_type,
            MemoryType,
            "PreferredMemory",
            "preferred_memory_type",
            "pb_utils.TRITONSERVER_MEMORY_GPU or pb_utils.TRITONSERVER_MEMORY_CPU",
        )
        self.preferred_device_id = as_int(
            preferred_device_id, "PreferredMemory", "preferred_device_id", "int64"
        )

    def __repr__(self) -> str:
        return f"PreferredMemory({self.preferred_memory_type.name}, {self.preferred_device_id})"
