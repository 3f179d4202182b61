// How many cores this process may use: sizes the thread budget of the stubs and the helper
// pool of big copies.
#pragma once

#include <string>

namespace pybackend {

// Cores this process may use, at least 1: the CPUs of its affinity (sched_getaffinity: a
// container's cpuset, taskset), capped by the CPU limit of its cgroup (CgroupCpuLimit). A
// Kubernetes or Docker CPU limit is a CFS quota that leaves the affinity at every core of the
// node, and std::thread::hardware_concurrency() counts the whole host either way.
// PYBACKEND_CGROUP_ROOT, when set, replaces "/" as the root the cgroup files are read under:
// a test hook for fake cgroup trees, not a setting (ipc/cgroup.h).
int UsableCores();

// The CPU limit of this process's cgroup as a whole number of cores, rounded up (a quota of
// 1.5 CPUs is 2), or 0 when no limit is set or none can be read. `root` is prepended to
// /proc/self/cgroup and /sys/fs/cgroup ("" for the real ones). The smallest limit of the
// cgroup and its ancestors wins (a pod's limit sits on the pod, above the container; read by
// ipc::SmallestCgroupLimit, the reader the memory headroom shares): cgroup v2
// `cpu.max` ("max 100000" or "<quota> <period>") and cgroup v1 `cpu.cfs_quota_us` (-1: none) /
// `cpu.cfs_period_us` of the cpu controller.
int CgroupCpuLimit(const std::string& root);

}  // namespace pybackend
