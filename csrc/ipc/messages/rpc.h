// The stub's small requests and the backend's REPLY to them (docs/protocol.md, "Message
// kinds"): IS_CANCELLED, SENDER_DROPPED, the custom-metric messages METRIC_*, and the REPLY
// envelope with each kind's payload. Python: pybackend/ipc/rpc_codec.py (the envelope:
// control_codec.py).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipc/codec.h"
#include "ipc/protocol.h"

namespace pybackend::ipc {

// ------------------------------------------------------------------------------ REPLY
// `u8 ok`, then `u32 code, str message` when not ok, else the kind's payload.
std::vector<uint8_t> EncodeErrorReply(uint32_t code, std::string_view message);
// Ok with no payload (METRIC_INCREMENT, METRIC_SET, METRIC_OBSERVE, MODEL_LOAD, MODEL_UNLOAD).
std::vector<uint8_t> EncodeEmptyReply();
// Ok with `u8` (IS_CANCELLED: cancelled; MODEL_READY: ready).
std::vector<uint8_t> EncodeFlagReply(bool flag);
// Ok with `u64 id` (METRIC_FAMILY_NEW: the family's, METRIC_NEW: the metric's).
std::vector<uint8_t> EncodeIdReply(uint64_t id);
// Ok with `f64 value` (METRIC_VALUE).
std::vector<uint8_t> EncodeValueReply(double value);

// ---------------------------------------------------- IS_CANCELLED, SENDER_DROPPED
// Both carry only the request's token.
std::vector<uint8_t> EncodeToken(uint64_t token);
uint64_t DecodeToken(const std::vector<uint8_t>& body);

// ------------------------------------------------------------------------- METRIC_*
struct MetricFamilyNewMsg {
  uint8_t kind = 0;  // TRITONSERVER_MetricKind
  std::string name;
  std::string description;
};
std::vector<uint8_t> EncodeMetricFamilyNew(const MetricFamilyNewMsg& m);
MetricFamilyNewMsg DecodeMetricFamilyNew(const std::vector<uint8_t>& body);

// METRIC_FAMILY_DELETE carries the family id alone: EncodeToken / DecodeToken's layout.

struct MetricNewMsg {
  uint64_t family_id = 0;
  std::vector<std::pair<std::string, std::string>> labels;
  bool has_buckets = false;
  std::vector<double> buckets;
};
std::vector<uint8_t> EncodeMetricNew(const MetricNewMsg& m);
MetricNewMsg DecodeMetricNew(const std::vector<uint8_t>& body);

// METRIC_VALUE (no value), METRIC_INCREMENT, METRIC_SET, METRIC_OBSERVE.
struct MetricOpMsg {
  uint64_t metric_id = 0;
  double value = 0.0;
};
std::vector<uint8_t> EncodeMetricOp(MessageKind kind, const MetricOpMsg& m);
MetricOpMsg DecodeMetricOp(MessageKind kind, const std::vector<uint8_t>& body);

}  // namespace pybackend::ipc
