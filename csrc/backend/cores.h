// How many cores this process may use: sizes the thread budget of the stubs and the helper
// pool of big copies.
#pragma once

namespace pybackend {

// Cores this process may run on (sched_getaffinity: a container's cpuset, taskset), at
// least 1. std::thread::hardware_concurrency() counts the whole host instead.
int VisibleCores();

}  // namespace pybackend
