#include "backend/metric_families.h"

#include <map>
#include <mutex>

#include "backend/error.h"

namespace pybackend {

namespace {

struct Shared {
  TRITONSERVER_MetricFamily* family = nullptr;
  TRITONSERVER_MetricKind kind = TRITONSERVER_METRIC_KIND_COUNTER;
  int users = 0;
};

std::mutex& Mutex() {
  static std::mutex mu;
  return mu;
}

// Leaked on purpose: stubs may release families while the process exits.
std::map<std::string, Shared>& Families() {
  static auto* families = new std::map<std::string, Shared>();
  return *families;
}

}  // namespace

std::string AcquireMetricFamily(TRITONSERVER_MetricKind kind, const std::string& name,
                                const std::string& description,
                                TRITONSERVER_MetricFamily** family) {
  std::lock_guard<std::mutex> lock(Mutex());
  auto found = Families().find(name);
  if (found != Families().end() && found->second.kind == kind) {
    found->second.users++;
    *family = found->second.family;
    return "";
  }
  // New name, or another kind: Triton decides (and refuses a kind the name already has).
  TRITONSERVER_MetricFamily* made = nullptr;
  std::string err =
      TakeMessage(TRITONSERVER_MetricFamilyNew(&made, kind, name.c_str(), description.c_str()));
  if (!err.empty()) return err;
  if (found != Families().end()) {
    TakeMessage(TRITONSERVER_MetricFamilyDelete(made));
    return "Family name already exists with different type";
  }
  Families()[name] = Shared{made, kind, 1};
  *family = made;
  return "";
}

std::string ReleaseMetricFamily(TRITONSERVER_MetricFamily* family) {
  std::lock_guard<std::mutex> lock(Mutex());
  for (auto it = Families().begin(); it != Families().end(); ++it) {
    if (it->second.family != family) continue;
    if (--it->second.users > 0) return "";
    Families().erase(it);
    break;
  }
  return TakeMessage(TRITONSERVER_MetricFamilyDelete(family));
}

}  // namespace pybackend
