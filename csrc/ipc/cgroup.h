// The one reader of cgroup limits (the CPU quota of backend/cores.h, the memory limit of
// ipc/memory_headroom.h): the smallest limit over this process's cgroup and its ancestors.
// A limit usually sits above our own cgroup: a Kubernetes pod's limit on the pod's cgroup
// above the container's, a systemd slice's on the slice. Here in ipc/ (the lower layer) so
// both the arena and the backend can use it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace pybackend::ipc {

// What a reader returns when a cgroup sets no limit (or one we cannot make sense of: no limit
// is the safe reading).
constexpr uint64_t kNoCgroupLimit = std::numeric_limits<uint64_t>::max();

// One controller's limit files. Each reader gets one cgroup directory and returns its limit,
// or kNoCgroupLimit; the walker compares the figures, so they must grow with the limit.
struct CgroupController {
  const char* v1_name;                          // "cpu", "memory": its v1 hierarchy's name
  uint64_t (*read_v2)(const std::string& dir);  // the unified hierarchy (cgroup v2)
  uint64_t (*read_v1)(const std::string& dir);  // the controller's own hierarchy (cgroup v1)
};

// PYBACKEND_CGROUP_ROOT, or "" when not set: replaces "/" as the root the cgroup files (and
// /proc/meminfo) are read under. A test hook for fake cgroup trees, not a setting.
std::string CgroupRoot();

// The smallest limit of `controller` over this process's cgroup and its ancestors, up to the
// hierarchy's mount point, or kNoCgroupLimit. `root` is prepended to /proc/self/cgroup and
// /sys/fs/cgroup. Every line of /proc/self/cgroup counts: "0::<path>" is the v2 hierarchy, a
// line listing the controller ("4:cpu,cpuacct:<path>") its v1 hierarchy, mounted under the
// joined names or the controller's own; a hybrid host lists both and the smaller applies.
// Where the path is not there under the mount (a cgroup v1 container whose own cgroup is
// bind-mounted at the mount point), the mount itself is our cgroup.
uint64_t SmallestCgroupLimit(const std::string& root, const CgroupController& controller);

// The first whole number in the file, or kNoCgroupLimit when it is missing, "max" or not a
// number: the format of memory.max, memory.limit_in_bytes and cpu.cfs_period_us.
uint64_t ReadCgroupNumber(const std::string& path);

}  // namespace pybackend::ipc
