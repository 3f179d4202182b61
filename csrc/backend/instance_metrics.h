// pybackend's own Prometheus metrics, per model instance (UV-38): where each batch's time
// went (inputs to the stub, the stub's execute, outputs to Triton), how many batches and
// requests ran, and the stub's health (restarts, ready). Triton's own metrics have the same
// three stages per model only; an operator looking for the slow or restarting instance
// needs them per instance. Backend config instance-metrics=false turns them off.
#pragma once

#include <cstdint>
#include <string>

#include "triton/tritonserver.h"

namespace pybackend {

// The metric families, made once per backend and deleted with it (after every instance).
class InstanceMetricFamilies {
 public:
  InstanceMetricFamilies();  // a family Triton refuses (metrics off) leaves all of them off
  ~InstanceMetricFamilies();
  InstanceMetricFamilies(const InstanceMetricFamilies&) = delete;
  InstanceMetricFamilies& operator=(const InstanceMetricFamilies&) = delete;

  bool enabled() const { return enabled_; }

  enum Index {
    kInputUs,
    kInferUs,
    kOutputUs,
    kExecutions,
    kRequests,
    kRestarts,
    kReady,
    kGpuCopies,      // one series per direction label (d2d, d2h, h2d)
    kGpuIpcHandles,  // the stub's allocations the backend has mapped now
    kCount
  };
  TRITONSERVER_MetricFamily* family(Index i) const { return families_[i]; }

 private:
  bool enabled_ = false;
  TRITONSERVER_MetricFamily* families_[kCount] = {};
};

// One instance's series ({model, version, instance}); every call is a no-op when disabled.
class InstanceMetrics {
 public:
  InstanceMetrics(const InstanceMetricFamilies* families, const std::string& model,
                  uint64_t version, const std::string& instance);
  ~InstanceMetrics();
  InstanceMetrics(const InstanceMetrics&) = delete;
  InstanceMetrics& operator=(const InstanceMetrics&) = delete;

  // One batch: the three stages in nanoseconds and its number of requests.
  void Batch(uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns, size_t requests);
  void Restarted();
  void SetReady(bool ready);
  // One copy the backend made of this instance's GPU tensors; direction 0 d2d, 1 d2h, 2 h2d
  // (cuda::Direction). Thread-safe, as every call here.
  void GpuCopy(int direction);
  void SetIpcHandlesOpen(size_t n);

 private:
  void Add(InstanceMetricFamilies::Index i, double value);
  TRITONSERVER_Metric* metrics_[InstanceMetricFamilies::kCount] = {};
  TRITONSERVER_Metric* gpu_copies_[3] = {};
};

}  // namespace pybackend
