// Custom metrics (pb_utils.MetricFamily / Metric) of one stub, bridged to Triton's
// TRITONSERVER_MetricFamily / TRITONSERVER_Metric API. The stub names families and metrics by
// ids we hand out. A metric lives as long as its family (as in the original); a family goes when
// the stub says so, and everything a stub created is deleted when the stub's session ends
// (unload, crash, restart), even when the Python objects were never garbage-collected. The
// Triton family objects behind the ids are shared by all stubs (metric_families.h).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ipc/channel.h"
#include "ipc/codec.h"
#include "triton/tritonserver.h"

namespace pybackend {

class StubSession;

class CustomMetrics {
 public:
  // `instance` names the model instance in error texts, as the original does.
  explicit CustomMetrics(std::string instance) : instance_(std::move(instance)) {}
  ~CustomMetrics() { Clear(); }
  CustomMetrics(const CustomMetrics&) = delete;
  CustomMetrics& operator=(const CustomMetrics&) = delete;

  // True for the METRIC_* kinds (60-79). Handles `msg` and, for requests, sends the REPLY.
  static bool IsMetricKind(uint16_t kind) { return kind >= 60 && kind <= 79; }
  void Handle(StubSession& session, const ipc::Message& msg);

  // Deletes every metric, then every family (metrics before their family, as Triton wants).
  void Clear();

 private:
  struct MetricEntry {
    TRITONSERVER_Metric* metric = nullptr;
    uint64_t family_id = 0;
  };
  // Each returns the core's error text ("" on success) and sets the ok REPLY's body.
  std::string FamilyNew(const ipc::Message& msg, std::vector<uint8_t>* reply);
  void FamilyDelete(uint64_t family_id);
  std::string MetricNew(const ipc::Message& msg, std::vector<uint8_t>* reply);
  std::string MetricOp(const ipc::Message& msg, std::vector<uint8_t>* reply);

  std::string instance_;
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, TRITONSERVER_MetricFamily*> families_;
  std::map<uint64_t, MetricEntry> metrics_;
};

}  // namespace pybackend
