#include "backend/thread_budget.h"

#include <cstdlib>

#include "backend/cores.h"
#include "backend/error.h"

namespace pybackend {

const std::vector<std::string>& ThreadBudgetVariables() {
  // OpenMP (also PyTorch's and ONNX Runtime's intra-op pools), Intel MKL, OpenBLAS (NumPy's
  // usual BLAS), BLIS, numexpr.
  // Never destroyed: a restarter may spawn a stub while exit() runs static destructors.
  static const auto& kVariables = *new const std::vector<std::string>{
      "OMP_NUM_THREADS",  "MKL_NUM_THREADS",     "OPENBLAS_NUM_THREADS",
      "BLIS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
  };
  return kVariables;
}

int CountInstances(const json::Value& config) {
  int total = 0;
  if (const json::Value* groups = config.Find("instance_group");
      groups != nullptr && groups->is_array()) {
    for (const json::Value& g : groups->items()) {
      int64_t count = 1;
      if (const json::Value* c = g.Find("count"); c != nullptr && c->is_number()) {
        count = c->AsInt();
      }
      int64_t gpus = 1;
      if (const json::Value* list = g.Find("gpus");
          list != nullptr && list->is_array() && !list->items().empty()) {
        gpus = static_cast<int64_t>(list->items().size());
      }
      if (count > 0) total += static_cast<int>(count * gpus);
    }
  }
  return total > 0 ? total : 1;
}

int ThreadBudget(const std::string& model_name, const json::Value& config,
                 const std::string& parameter, bool enabled_by_backend) {
  if (parameter == "off") return 0;
  if (parameter.empty() || parameter == "auto") {
    if (!enabled_by_backend) return 0;
    int share = UsableCores() / CountInstances(config);
    return share > 0 ? share : 1;
  }
  char* end = nullptr;
  long n = std::strtol(parameter.c_str(), &end, 10);
  if (end == parameter.c_str() || *end != '\0' || n < 1 || n > 1000000) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          "model '" + model_name + "': parameter THREAD_BUDGET must be \"auto\", \"off\" or a " +
              "positive number of threads per instance, got '" + parameter + "'");
  }
  return static_cast<int>(n);  // an explicit number applies even if the backend turned it off
}

std::vector<std::pair<std::string, std::string>> ThreadBudgetEnv(int threads) {
  std::vector<std::pair<std::string, std::string>> env;
  if (threads <= 0) return env;
  for (const std::string& name : ThreadBudgetVariables()) {
    const char* set = std::getenv(name.c_str());
    if (set == nullptr) env.emplace_back(name, std::to_string(threads));
  }
  return env;
}

}  // namespace pybackend
