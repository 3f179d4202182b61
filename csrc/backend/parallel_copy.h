// Large tensor copies split over a small pool of helper threads.
//
// Why: a copy into memory that was just allocated (Triton's output buffer of a big response,
// a new shared-memory segment) is bound by page faults, not by memory bandwidth; the kernel
// handles faults of different threads in parallel, so two threads copy 64 MiB into fresh
// memory in about half the time of one (26 ms -> 14 ms on the 2-vCPU benchmark machine).
// Copies below the threshold, and every copy on a one-core machine, stay a plain memcpy.
#pragma once

#include <cstddef>

namespace pybackend {

// Copies below this many bytes never use the pool (a hand-off costs more than it saves).
constexpr size_t kParallelCopyMinBytes = 2u << 20;

// memcpy(dst, src, n), done by the calling thread and up to (visible cores - 1, at most 3) helpers
// when n >= kParallelCopyMinBytes. The caller takes chunks itself, so a busy pool never
// makes a copy slower than doing it alone. Thread-safe.
void CopyBytes(void* dst, const void* src, size_t n);

// CopyBytes into memory that was just allocated and that the copy fills completely (Triton's
// output buffers): the 2 MiB-aligned part of it is first marked for transparent huge pages
// (where the kernel runs THP in "madvise" mode), so it faults in a few huge pages instead of
// one 4 KiB page at a time (64 MiB: 26 ms -> 11 ms single-threaded on the benchmark machine).
void CopyBytesToFresh(void* dst, const void* src, size_t n);

}  // namespace pybackend
