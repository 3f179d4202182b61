// Where the calling thread runs: its CPU affinity and NUMA memory policy. tritonserver gives
// the thread that creates an instance the instance group's host_policy (`--host-policy=
// <name>,cpu-cores=...` / `numa-node=...`); the original's stub inherits both from that
// thread when it is spawned there. A process not spawned there (the early stub, the process
// the instances share) has to be given them (docs/instances.md, "host_policy").
#pragma once

#include <vector>

#include "backend/json.h"

namespace pybackend {

struct ThreadPlacement {
  std::vector<int> cpus;             // sched_getaffinity of the thread, ascending
  int mempolicy_mode = 0;            // get_mempolicy: MPOL_* with its flags (0: default)
  std::vector<unsigned long> nodes;  // its node mask, trailing zero words dropped
  bool known = false;                // false when the kernel would not say

  bool operator==(const ThreadPlacement& o) const {
    return known == o.known && cpus == o.cpus && mempolicy_mode == o.mempolicy_mode &&
           nodes == o.nodes;
  }
  bool operator!=(const ThreadPlacement& o) const { return !(*this == o); }

  // {"cpus": [...], "mempolicy_mode": N, "nodes": [...]} (the host applies it:
  // pybackend/stub/placement.py); null when not known.
  json::Value ToJson() const;
};

ThreadPlacement CurrentThreadPlacement();

}  // namespace pybackend
