#include "backend/cores.h"

#include <sched.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

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

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// ceil(quota / period), 0 for no quota (or a value we cannot make sense of: no limit is the
// safe reading, the affinity still applies).
int CoresOfQuota(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  long long cores = (quota + period - 1) / period;
  return cores > 1000000 ? 1000000 : static_cast<int>(cores);
}

// cgroup v2: cpu.max holds "max <period>" or "<quota> <period>".
int V2Limit(const std::string& dir) {
  std::ifstream file(dir + "/cpu.max");
  std::string quota;
  long long period = 0;
  if (!(file >> quota >> period) || quota == "max") return 0;
  char* end = nullptr;
  long long q = std::strtoll(quota.c_str(), &end, 10);
  return *end == '\0' ? CoresOfQuota(q, period) : 0;
}

// cgroup v1, cpu controller: cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us.
int V1Limit(const std::string& dir) {
  std::ifstream quota_file(dir + "/cpu.cfs_quota_us");
  std::ifstream period_file(dir + "/cpu.cfs_period_us");
  long long quota = 0;
  long long period = 0;
  if (!(quota_file >> quota) || !(period_file >> period)) return 0;
  return CoresOfQuota(quota, period);
}

// The smallest limit of the cgroup `path` (as /proc/self/cgroup names it) and its ancestors,
// under the hierarchy mounted at `mount`. In a container with its own cgroup namespace the
// path is "/" already; where the container's cgroup is bind-mounted at the mount point instead
// (cgroup v1 Docker), the path names a directory that does not exist there, and the mount
// itself is the container's cgroup.
int SmallestLimitUpward(const std::string& mount, std::string path,
                        int (*limit)(const std::string&)) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty() || path[0] != '/' || !IsDirectory(mount + path)) path = "/";
  int smallest = 0;
  for (;;) {
    int n = limit(path == "/" ? mount : mount + path);
    if (n > 0 && (smallest == 0 || n < smallest)) smallest = n;
    if (path == "/") return smallest;
    size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

bool ListsCpuController(const std::string& controllers) {
  std::stringstream list(controllers);
  std::string name;
  while (std::getline(list, name, ',')) {
    if (name == "cpu") return true;
  }
  return false;
}

}  // namespace

int CgroupCpuLimit(const std::string& root) {
  std::ifstream self(root + "/proc/self/cgroup");
  const std::string mount = root + "/sys/fs/cgroup";
  int smallest = 0;
  std::string line;
  // Lines are "<id>:<controllers>:<path>"; "0::<path>" is the v2 (unified) hierarchy. A hybrid
  // host lists both; whichever sets a limit applies.
  while (std::getline(self, line)) {
    size_t first = line.find(':');
    size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    int n = 0;
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      n = SmallestLimitUpward(mount, path, V2Limit);
    } else if (ListsCpuController(controllers)) {
      // Mounted under the joined names ("cpu,cpuacct"), usually with a "cpu" link beside it.
      std::string dir = mount + "/" + controllers;
      n = SmallestLimitUpward(IsDirectory(dir) ? dir : mount + "/cpu", path, V1Limit);
    }
    if (n > 0 && (smallest == 0 || n < smallest)) smallest = n;
  }
  return smallest;
}

int UsableCores() {
  int cores = AffinityCores();
  const char* root = std::getenv("PYBACKEND_CGROUP_ROOT");
  int limit = CgroupCpuLimit(root != nullptr ? root : "");
  return limit > 0 && limit < cores ? limit : cores;
}

}  // namespace pybackend
