"""``PreferredMemory`` for BLS requests. pb_utils' memory-type numbers are its own
(GPU=0, CPU=1), not the C ``TRITONSERVER_MemoryType`` values."""

from __future__ import annotations

import enum


class MemoryType(enum.IntEnum):
    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1
    DEFAULT = 2  # internal: keep the callee's own preference


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU


class PreferredMemory:
    """Where a BLS callee should put its outputs."""

    __slots__ = ("preferred_memory_type", "preferred_device_id")

    def __init__(
        self, preferred_memory_type: int = MemoryType.DEFAULT, preferred_device_id: int = 0
    ) -> None:
        try:
            self.preferred_memory_type = MemoryType(int(preferred_memory_type))
        except (TypeError, ValueError):
            raise TypeError(
                "preferred_memory_type must be pb_utils.TRITONSERVER_MEMORY_GPU or "
                f"pb_utils.TRITONSERVER_MEMORY_CPU, got {preferred_memory_type!r}"
            ) from None
        if not isinstance(preferred_device_id, int) or preferred_device_id < 0:
            raise TypeError(
                f"preferred_device_id must be a non-negative int, got {preferred_device_id!r}"
            )
        self.preferred_device_id = preferred_device_id

    def __repr__(self) -> str:
        return f"PreferredMemory({self.preferred_memory_type.name}, {self.preferred_device_id})"
