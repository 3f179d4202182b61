#include "backend/custom_metrics.h"

#include <vector>

#include "backend/error.h"
#include "backend/logging.h"
#include "backend/metric_families.h"
#include "backend/stub_session.h"
#include "ipc/codec.h"
#include "ipc/messages/rpc.h"
#include "ipc/protocol.h"

namespace pybackend {

namespace {

using ipc::MessageKind;

// Sends the REPLY for request `msg`: `ok`, or the error text with `code`.
void Reply(StubSession& s, const ipc::Message& msg, const std::string& error,
           TRITONSERVER_Error_Code code, const std::vector<uint8_t>& ok) {
  std::vector<uint8_t> err_reply;
  if (!error.empty()) err_reply = ipc::EncodeErrorReply(code, error);
  std::string send_err;
  if (!s.async().Send(MessageKind::REPLY, msg.id, error.empty() ? ok : err_reply,
                      static_cast<int>(s.options().timeout.count()), &send_err)) {
    PB_LOG_ERROR(s.log_prefix() + send_err);
  }
}

// Owns the TRITONSERVER_Parameter labels for one MetricNewWithArgs call.
struct Labels {
  std::vector<TRITONSERVER_Parameter*> params;
  ~Labels() {
    for (TRITONSERVER_Parameter* p : params) TRITONSERVER_ParameterDelete(p);
  }
};

}  // namespace

void CustomMetrics::Handle(StubSession& s, const ipc::Message& msg) {
  auto kind = static_cast<MessageKind>(msg.kind);
  std::vector<uint8_t> reply = ipc::EncodeEmptyReply();
  std::string error;
  try {
    switch (kind) {
      case MessageKind::METRIC_FAMILY_DELETE:
        FamilyDelete(ipc::DecodeToken(msg.body));
        return;  // one-way: the stub does not wait (it may be a garbage-collector callback)
      case MessageKind::METRIC_FAMILY_NEW:
        error = FamilyNew(msg, &reply);
        break;
      case MessageKind::METRIC_NEW:
        error = MetricNew(msg, &reply);
        break;
      case MessageKind::METRIC_VALUE:
      case MessageKind::METRIC_INCREMENT:
      case MessageKind::METRIC_SET:
      case MessageKind::METRIC_OBSERVE:
        error = MetricOp(msg, &reply);
        break;
      default:
        error = std::string("unknown metrics message ") + ipc::KindName(msg.kind);
    }
  } catch (const std::exception& e) {
    error = std::string("malformed ") + ipc::KindName(msg.kind) + " message: " + e.what();
    if (kind == MessageKind::METRIC_FAMILY_DELETE) {
      PB_LOG_ERROR(s.log_prefix() + error);
      return;
    }
  }
  // The stub adds its operation's prefix ("Failed to increment metric value: "); the text
  // in between is the one the original's stub reports for an error of the server's API.
  if (!error.empty()) {
    error = "Failed to process the request for model '" + instance_ + "', message: " + error;
  }
  Reply(s, msg, error, TRITONSERVER_ERROR_INTERNAL, reply);
}

std::string CustomMetrics::FamilyNew(const ipc::Message& msg, std::vector<uint8_t>* reply) {
  ipc::MetricFamilyNewMsg m = ipc::DecodeMetricFamilyNew(msg.body);
  uint8_t kind = m.kind;
  const std::string& name = m.name;
  const std::string& description = m.description;
  if (kind > TRITONSERVER_METRIC_KIND_HISTOGRAM) {
    return "unknown metric kind " + std::to_string(kind) + " (COUNTER=0, GAUGE=1, HISTOGRAM=2)";
  }
  TRITONSERVER_MetricFamily* family = nullptr;
  std::string err =
      AcquireMetricFamily(static_cast<TRITONSERVER_MetricKind>(kind), name, description, &family);
  if (!err.empty()) return err;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  families_[id] = family;
  *reply = ipc::EncodeIdReply(id);
  return "";
}

void CustomMetrics::FamilyDelete(uint64_t family_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto fam = families_.find(family_id);
  if (fam == families_.end()) return;
  // Python may drop the family before its metrics; Triton wants metrics deleted first.
  for (auto it = metrics_.begin(); it != metrics_.end();) {
    if (it->second.family_id == family_id) {
      std::string err = TakeMessage(TRITONSERVER_MetricDelete(it->second.metric));
      if (!err.empty()) PB_LOG_WARN("instance '" + instance_ + "': deleting a metric: " + err);
      it = metrics_.erase(it);
    } else {
      ++it;
    }
  }
  std::string err = ReleaseMetricFamily(fam->second);
  if (!err.empty()) PB_LOG_WARN("instance '" + instance_ + "': deleting a metric family: " + err);
  families_.erase(fam);
}

std::string CustomMetrics::MetricNew(const ipc::Message& msg, std::vector<uint8_t>* reply) {
  ipc::MetricNewMsg m = ipc::DecodeMetricNew(msg.body);
  uint64_t family_id = m.family_id;
  Labels labels;
  for (const auto& [key, value] : m.labels) {
    labels.params.push_back(
        TRITONSERVER_ParameterNew(key.c_str(), TRITONSERVER_PARAMETER_STRING, value.c_str()));
  }
  const std::vector<double>& buckets = m.buckets;
  bool has_buckets = m.has_buckets;
  std::lock_guard<std::mutex> lock(mu_);
  auto fam = families_.find(family_id);
  if (fam == families_.end()) return "the metric family was deleted";
  TRITONSERVER_MetricArgs* args = nullptr;
  if (has_buckets) {
    std::string err = TakeMessage(TRITONSERVER_MetricArgsNew(&args));
    if (err.empty()) {
      err = TakeMessage(TRITONSERVER_MetricArgsSetHistogram(args, buckets.data(), buckets.size()));
    }
    if (!err.empty()) {
      if (args != nullptr) TakeMessage(TRITONSERVER_MetricArgsDelete(args));
      return err;
    }
  }
  TRITONSERVER_Metric* metric = nullptr;
  std::string err = TakeMessage(TRITONSERVER_MetricNewWithArgs(
      &metric, fam->second, const_cast<const TRITONSERVER_Parameter**>(labels.params.data()),
      labels.params.size(), args));
  if (args != nullptr) TakeMessage(TRITONSERVER_MetricArgsDelete(args));
  if (!err.empty()) return err;
  uint64_t id = next_id_++;
  metrics_[id] = MetricEntry{metric, family_id};
  *reply = ipc::EncodeIdReply(id);
  return "";
}

std::string CustomMetrics::MetricOp(const ipc::Message& msg, std::vector<uint8_t>* reply) {
  auto kind = static_cast<MessageKind>(msg.kind);
  ipc::MetricOpMsg op = ipc::DecodeMetricOp(kind, msg.body);
  uint64_t metric_id = op.metric_id;
  double value = op.value;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = metrics_.find(metric_id);
  if (it == metrics_.end()) return "the metric was deleted";
  TRITONSERVER_Metric* m = it->second.metric;
  switch (kind) {
    case MessageKind::METRIC_VALUE: {
      double out = 0.0;
      std::string err = TakeMessage(TRITONSERVER_MetricValue(m, &out));
      if (err.empty()) *reply = ipc::EncodeValueReply(out);
      return err;
    }
    case MessageKind::METRIC_INCREMENT:
      return TakeMessage(TRITONSERVER_MetricIncrement(m, value));
    case MessageKind::METRIC_SET:
      return TakeMessage(TRITONSERVER_MetricSet(m, value));
    default:
      return TakeMessage(TRITONSERVER_MetricObserve(m, value));
  }
}

void CustomMetrics::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, entry] : metrics_) {
    std::string err = TakeMessage(TRITONSERVER_MetricDelete(entry.metric));
    if (!err.empty()) PB_LOG_WARN("instance '" + instance_ + "': deleting a metric: " + err);
  }
  metrics_.clear();
  for (auto& [id, family] : families_) {
    std::string err = ReleaseMetricFamily(family);
    if (!err.empty()) PB_LOG_WARN("instance '" + instance_ + "': deleting a metric family: " + err);
  }
  families_.clear();
}

}  // namespace pybackend
