// How much memory a new shared-memory segment may take before reserving it would OOM-kill.
//
// Segments are reserved with fallocate so running out is an error, not a SIGBUS. But on a
// memfd (no size limit of its own) a fallocate larger than the free memory does not fail: the
// kernel reclaims, then its OOM killer kills processes (any on the machine, or the biggest in
// the container, usually tritonserver) to make room. A segment larger than what is left is
// refused here first, with the figures, so a too-large shm-default-byte-size or tensor is an
// error of the one request (or load), never a killed server.
#pragma once

#include <cstdint>
#include <string>

namespace pybackend::ipc {

// Bytes of memory a new segment may reserve: MemAvailable of /proc/meminfo, and no more than
// the smallest memory limit of this process's cgroup and its ancestors (v2 memory.max, v1
// memory.limit_in_bytes; ipc/cgroup.h), so a pod's or slice's limit above ours counts. Only
// the limit itself, not its headroom: a cgroup's usage counts page cache the kernel reclaims.
// UINT64_MAX when nothing is known. `why` (if not null) says which figure bounds it.
uint64_t MemoryHeadroom(std::string* why);

// Throws ArenaError when a segment of `size` bytes cannot fit (checked for 8 MiB and more:
// smaller ones cannot kill anything a moment later, and skip reading /proc).
void CheckHeadroom(uint64_t size);

}  // namespace pybackend::ipc
