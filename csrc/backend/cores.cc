#include "backend/cores.h"

#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "ipc/cgroup.h"

namespace pybackend {
namespace {

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

// ceil(quota / period) as a limit for the walker: none for no quota (or a value we cannot make
// sense of: no limit is the safe reading, the affinity still applies).
uint64_t CoresOfQuota(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return ipc::kNoCgroupLimit;
  long long cores = (quota + period - 1) / period;
  return cores > 1000000 ? 1000000 : static_cast<uint64_t>(cores);
}

// cgroup v2: cpu.max holds "max <period>" or "<quota> <period>".
uint64_t V2Limit(const std::string& dir) {
  std::ifstream file(dir + "/cpu.max");
  std::string quota;
  long long period = 0;
  if (!(file >> quota >> period) || quota == "max") return ipc::kNoCgroupLimit;
  char* end = nullptr;
  long long q = std::strtoll(quota.c_str(), &end, 10);
  return *end == '\0' ? CoresOfQuota(q, period) : ipc::kNoCgroupLimit;
}

// cgroup v1, cpu controller: cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us.
uint64_t V1Limit(const std::string& dir) {
  std::ifstream quota_file(dir + "/cpu.cfs_quota_us");
  std::ifstream period_file(dir + "/cpu.cfs_period_us");
  long long quota = 0;
  long long period = 0;
  if (!(quota_file >> quota) || !(period_file >> period)) return ipc::kNoCgroupLimit;
  return CoresOfQuota(quota, period);
}

}  // namespace

int CgroupCpuLimit(const std::string& root) {
  uint64_t cores = ipc::SmallestCgroupLimit(root, {"cpu", V2Limit, V1Limit});
  return cores == ipc::kNoCgroupLimit ? 0 : static_cast<int>(cores);
}

int UsableCores() {
  int cores = AffinityCores();
  int limit = CgroupCpuLimit(ipc::CgroupRoot());
  return limit > 0 && limit < cores ? limit : cores;
}

}  // namespace pybackend
