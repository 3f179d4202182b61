// Per-instance thread budget (UV-13). OpenMP, MKL, OpenBLAS and friends start one thread per
// core in EVERY stub, so N instances on C cores run N*C threads and thrash. Unless the user
// chose (the variable is set in the server's environment) or turned it off, each stub gets
// OMP_NUM_THREADS etc. = max(1, floor(usable cores / instances of the model)), the usable cores
// being the CPU affinity capped by the cgroup's CPU limit (cores.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/json.h"

namespace pybackend {

// The variables the budget sets, in the order they are set.
const std::vector<std::string>& ThreadBudgetVariables();

// Instances the model config asks for: the sum of its instance_group counts (times the number
// of listed GPUs for a group that lists them), at least 1.
int CountInstances(const json::Value& config);

// The threads per instance: `parameter` is the model config parameter THREAD_BUDGET ("" when
// absent, "auto", "off" or a positive integer). Returns 0 when the budget is off. Throws
// BackendError naming the model for any other value.
int ThreadBudget(const std::string& model_name, const json::Value& config,
                 const std::string& parameter, bool enabled_by_backend);

// The environment entries for a budget of `threads` (none for 0), leaving out every variable
// already set in this process's environment.
std::vector<std::pair<std::string, std::string>> ThreadBudgetEnv(int threads);

}  // namespace pybackend
