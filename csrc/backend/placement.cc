#include "backend/placement.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace pybackend {
namespace {

constexpr unsigned long kMaxNodes = 1024;  // bits of the mask we ask for (MAX_NUMNODES)
constexpr size_t kWordBits = 8 * sizeof(unsigned long);

}  // namespace

ThreadPlacement CurrentThreadPlacement() {
  ThreadPlacement p;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return p;  // 0: the calling thread
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) p.cpus.push_back(cpu);
  }
#ifdef SYS_get_mempolicy
  int mode = 0;
  std::vector<unsigned long> mask(kMaxNodes / kWordBits, 0);
  if (syscall(SYS_get_mempolicy, &mode, mask.data(), kMaxNodes, nullptr, 0) == 0) {
    while (!mask.empty() && mask.back() == 0) mask.pop_back();
    p.mempolicy_mode = mode;
    p.nodes = std::move(mask);
  }
  // ENOSYS (a kernel without NUMA): every thread has the default policy, nothing to carry.
#endif
  p.known = true;
  return p;
}

json::Value ThreadPlacement::ToJson() const {
  if (!known) return json::Value();
  json::Value v = json::Value::Object();
  json::Value c = json::Value::Array();
  for (int cpu : cpus) c.Push(cpu);
  v.Set("cpus", std::move(c));
  v.Set("mempolicy_mode", mempolicy_mode);
  json::Value n = json::Value::Array();
  for (unsigned long w : nodes) n.Push(static_cast<uint64_t>(w));
  v.Set("nodes", std::move(n));
  return v;
}

}  // namespace pybackend
