#include "ipc/memory_headroom.h"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "ipc/arena.h"

namespace pybackend::ipc {
namespace {

constexpr uint64_t kCheckFrom = 8ull << 20;

// PYBACKEND_CGROUP_ROOT: the test hook of backend/cores.cc, a fake tree in place of "/".
std::string Root() {
  const char* root = std::getenv("PYBACKEND_CGROUP_ROOT");
  return root != nullptr ? root : "";
}

uint64_t ReadNumber(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::numeric_limits<uint64_t>::max();
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  return end != text.c_str() ? v : std::numeric_limits<uint64_t>::max();
}

uint64_t MemAvailable() {
  std::ifstream in(Root() + "/proc/meminfo");
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

// The limit of our own memory cgroup. In a container with its own cgroup namespace the path
// is "/"; where the path is not there (v1 Docker bind-mounts the container's cgroup at the
// mount point) the mount point is ours.
uint64_t CgroupLimit() {
  std::ifstream in(Root() + "/proc/self/cgroup");
  std::string line;
  uint64_t limit = std::numeric_limits<uint64_t>::max();
  while (std::getline(in, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string dir, file;
    if (line.rfind("0::", 0) == 0) {
      dir = Root() + "/sys/fs/cgroup";
      file = "memory.max";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      dir = Root() + "/sys/fs/cgroup/memory";
      file = "memory.limit_in_bytes";
    } else {
      continue;
    }
    uint64_t own = ReadNumber(dir + path + "/" + file);
    if (own == std::numeric_limits<uint64_t>::max()) own = ReadNumber(dir + "/" + file);
    if (own < limit) limit = own;
  }
  return limit;
}

}  // namespace

uint64_t MemoryHeadroom(std::string* why) {
  uint64_t available = MemAvailable(), limit = CgroupLimit();
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
