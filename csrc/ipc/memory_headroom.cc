#include "ipc/memory_headroom.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "ipc/arena.h"
#include "ipc/cgroup.h"

namespace pybackend::ipc {
namespace {

constexpr uint64_t kCheckFrom = 8ull << 20;

uint64_t MemAvailable() {
  std::ifstream in(CgroupRoot() + "/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      uint64_t kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  }
  return std::numeric_limits<uint64_t>::max();
}

// The memory limit of our cgroup and its ancestors: v2 memory.max, v1 memory.limit_in_bytes.
uint64_t ReadV2(const std::string& dir) { return ReadCgroupNumber(dir + "/memory.max"); }
uint64_t ReadV1(const std::string& dir) { return ReadCgroupNumber(dir + "/memory.limit_in_bytes"); }

}  // namespace

uint64_t MemoryHeadroom(std::string* why) {
  uint64_t available = MemAvailable();
  uint64_t limit = SmallestCgroupLimit(CgroupRoot(), {"memory", ReadV2, ReadV1});
  if (why != nullptr) {
    *why = limit < available
               ? "the memory limit of the container (cgroup) is " + std::to_string(limit) + " bytes"
               : "the machine has " + std::to_string(available) +
                     " bytes of memory available (MemAvailable)";
  }
  return limit < available ? limit : available;
}

void CheckHeadroom(uint64_t size) {
  if (size < kCheckFrom) return;
  std::string why;
  uint64_t headroom = MemoryHeadroom(&why);
  if (size <= headroom) return;
  throw ArenaError("could not reserve " + std::to_string(size) +
                   " bytes of shared memory for tensors: " + why +
                   ", so reserving it would make the kernel kill processes (OOM) (give the "
                   "machine or container more memory, lower shm-default-byte-size or "
                   "shm-growth-byte-size, or send smaller tensors)");
}

}  // namespace pybackend::ipc
