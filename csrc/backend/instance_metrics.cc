#include "backend/instance_metrics.h"

#include <vector>

#include "backend/error.h"
#include "backend/logging.h"

namespace pybackend {
namespace {

struct FamilySpec {
  TRITONSERVER_MetricKind kind;
  const char* name;
  const char* description;
};

// Indexed by InstanceMetricFamilies::Index. The *_duration_us names follow Triton's own
// nv_inference_compute_{input,infer,output}_duration_us, which are per model.
const FamilySpec kFamilies[InstanceMetricFamilies::kCount] = {
    {TRITONSERVER_METRIC_KIND_COUNTER, "pybackend_compute_input_duration_us",
     "Cumulative time a Python model instance spent handing its batches to the stub "
     "(encoding the requests, copying inputs into shared memory), in microseconds"},
    {TRITONSERVER_METRIC_KIND_COUNTER, "pybackend_compute_infer_duration_us",
     "Cumulative time a Python model instance waited for its stub: from EXECUTE sent to "
     "RESULT read (the model's execute() and the hand-offs between the processes), in "
     "microseconds"},
    {TRITONSERVER_METRIC_KIND_COUNTER, "pybackend_compute_output_duration_us",
     "Cumulative time a Python model instance spent on its stub's results (copying outputs "
     "into Triton's buffers, sending the responses), in microseconds"},
    {TRITONSERVER_METRIC_KIND_COUNTER, "pybackend_execution_count",
     "Batches (execute() calls) a Python model instance ran"},
    {TRITONSERVER_METRIC_KIND_COUNTER, "pybackend_inference_count",
     "Requests a Python model instance ran"},
    {TRITONSERVER_METRIC_KIND_COUNTER, "pybackend_stub_restarts",
     "Times a Python model instance's stub process died and a new one took over"},
    {TRITONSERVER_METRIC_KIND_GAUGE, "pybackend_stub_ready",
     "1 while a Python model instance's stub process is alive and serving, else 0"},
    {TRITONSERVER_METRIC_KIND_COUNTER, "pybackend_gpu_copies_total",
     "Copies the backend made of a Python model instance's GPU tensors, by direction "
     "(d2d: device to device, d2h: device to host, h2d: host to device); docs/gpu.md"},
    {TRITONSERVER_METRIC_KIND_GAUGE, "pybackend_gpu_ipc_handles_open",
     "CUDA IPC handles of a Python model instance's stub the backend has open now"},
};

const char* const kDirections[3] = {"d2d", "d2h", "h2d"};  // cuda::Direction order

}  // namespace

InstanceMetricFamilies::InstanceMetricFamilies() {
  for (int i = 0; i < kCount; ++i) {
    std::string err = TakeMessage(TRITONSERVER_MetricFamilyNew(
        &families_[i], kFamilies[i].kind, kFamilies[i].name, kFamilies[i].description));
    if (!err.empty()) {
      PB_LOG_VERBOSE("no per-instance metrics (" + std::string(kFamilies[i].name) + "): " + err);
      for (int j = 0; j < i; ++j) TakeMessage(TRITONSERVER_MetricFamilyDelete(families_[j]));
      for (auto& f : families_) f = nullptr;
      return;
    }
  }
  enabled_ = true;
}

InstanceMetricFamilies::~InstanceMetricFamilies() {
  for (TRITONSERVER_MetricFamily* f : families_) {
    if (f != nullptr) TakeMessage(TRITONSERVER_MetricFamilyDelete(f));
  }
}

InstanceMetrics::InstanceMetrics(const InstanceMetricFamilies* families, const std::string& model,
                                 uint64_t version, const std::string& instance) {
  if (families == nullptr || !families->enabled()) return;
  std::string v = std::to_string(version);
  std::vector<TRITONSERVER_Parameter*> labels = {
      TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model.c_str()),
      TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, v.c_str()),
      TRITONSERVER_ParameterNew("instance", TRITONSERVER_PARAMETER_STRING, instance.c_str())};
  auto make = [&](InstanceMetricFamilies::Index index, TRITONSERVER_Metric** out) {
    std::string err = TakeMessage(TRITONSERVER_MetricNewWithArgs(
        out, families->family(index), const_cast<const TRITONSERVER_Parameter**>(labels.data()),
        labels.size(), nullptr));
    if (!err.empty()) {
      PB_LOG_WARN("instance '" + instance + "': no per-instance metric: " + err);
      *out = nullptr;
    }
  };
  for (int i = 0; i < InstanceMetricFamilies::kCount; ++i) {
    auto index = static_cast<InstanceMetricFamilies::Index>(i);
    if (index != InstanceMetricFamilies::kGpuCopies) make(index, &metrics_[i]);
  }
  for (int d = 0; d < 3; ++d) {
    labels.push_back(
        TRITONSERVER_ParameterNew("direction", TRITONSERVER_PARAMETER_STRING, kDirections[d]));
    make(InstanceMetricFamilies::kGpuCopies, &gpu_copies_[d]);
    TRITONSERVER_ParameterDelete(labels.back());
    labels.pop_back();
  }
  for (TRITONSERVER_Parameter* p : labels) TRITONSERVER_ParameterDelete(p);
}

InstanceMetrics::~InstanceMetrics() {
  for (TRITONSERVER_Metric* m : metrics_) {
    if (m != nullptr) TakeMessage(TRITONSERVER_MetricDelete(m));
  }
  for (TRITONSERVER_Metric* m : gpu_copies_) {
    if (m != nullptr) TakeMessage(TRITONSERVER_MetricDelete(m));
  }
}

void InstanceMetrics::Add(InstanceMetricFamilies::Index i, double value) {
  if (metrics_[i] != nullptr) TakeMessage(TRITONSERVER_MetricIncrement(metrics_[i], value));
}

void InstanceMetrics::Batch(uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns,
                            size_t requests) {
  Add(InstanceMetricFamilies::kInputUs, static_cast<double>(input_ns) / 1000.0);
  Add(InstanceMetricFamilies::kInferUs, static_cast<double>(infer_ns) / 1000.0);
  Add(InstanceMetricFamilies::kOutputUs, static_cast<double>(output_ns) / 1000.0);
  Add(InstanceMetricFamilies::kExecutions, 1);
  Add(InstanceMetricFamilies::kRequests, static_cast<double>(requests));
}

void InstanceMetrics::Restarted() { Add(InstanceMetricFamilies::kRestarts, 1); }

void InstanceMetrics::GpuCopy(int direction) {
  if (direction < 0 || direction > 2 || gpu_copies_[direction] == nullptr) return;
  TakeMessage(TRITONSERVER_MetricIncrement(gpu_copies_[direction], 1));
}

void InstanceMetrics::SetIpcHandlesOpen(size_t n) {
  TRITONSERVER_Metric* m = metrics_[InstanceMetricFamilies::kGpuIpcHandles];
  if (m != nullptr) TakeMessage(TRITONSERVER_MetricSet(m, static_cast<double>(n)));
}

void InstanceMetrics::SetReady(bool ready) {
  TRITONSERVER_Metric* m = metrics_[InstanceMetricFamilies::kReady];
  if (m != nullptr) TakeMessage(TRITONSERVER_MetricSet(m, ready ? 1 : 0));
}

}  // namespace pybackend
