#include "ipc/messages/rpc.h"

namespace pybackend::ipc {

std::vector<uint8_t> EncodeErrorReply(uint32_t code, std::string_view message) {
  Writer w;
  w.U8(0);
  w.U32(code);
  w.Str(message);
  return w.Take();
}

std::vector<uint8_t> EncodeEmptyReply() { return {1}; }

std::vector<uint8_t> EncodeFlagReply(bool flag) { return {1, static_cast<uint8_t>(flag ? 1 : 0)}; }

std::vector<uint8_t> EncodeIdReply(uint64_t id) {
  Writer w;
  w.U8(1);
  w.U64(id);
  return w.Take();
}

std::vector<uint8_t> EncodeValueReply(double value) {
  Writer w;
  w.U8(1);
  w.F64(value);
  return w.Take();
}

std::vector<uint8_t> EncodeToken(uint64_t token) {
  Writer w;
  w.U64(token);
  return w.Take();
}

uint64_t DecodeToken(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  return r.U64();
}

std::vector<uint8_t> EncodeMetricFamilyNew(const MetricFamilyNewMsg& m) {
  Writer w;
  w.U8(m.kind);
  w.Str(m.name);
  w.Str(m.description);
  return w.Take();
}

MetricFamilyNewMsg DecodeMetricFamilyNew(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  MetricFamilyNewMsg m;
  m.kind = r.U8();
  m.name = r.Str();
  m.description = r.Str();
  return m;
}

std::vector<uint8_t> EncodeMetricNew(const MetricNewMsg& m) {
  Writer w;
  w.U64(m.family_id);
  w.U32(static_cast<uint32_t>(m.labels.size()));
  for (const auto& [key, value] : m.labels) {
    w.Str(key);
    w.Str(value);
  }
  w.U8(m.has_buckets ? 1 : 0);
  if (m.has_buckets) {
    w.U32(static_cast<uint32_t>(m.buckets.size()));
    for (double b : m.buckets) w.F64(b);
  }
  return w.Take();
}

MetricNewMsg DecodeMetricNew(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  MetricNewMsg m;
  m.family_id = r.U64();
  uint32_t n_labels = r.U32();
  for (uint32_t i = 0; i < n_labels; ++i) {
    std::string key = r.Str();
    m.labels.emplace_back(std::move(key), r.Str());
  }
  m.has_buckets = r.U8() != 0;
  if (m.has_buckets) {
    uint32_t n = r.U32();
    for (uint32_t i = 0; i < n; ++i) m.buckets.push_back(r.F64());
  }
  return m;
}

std::vector<uint8_t> EncodeMetricOp(MessageKind kind, const MetricOpMsg& m) {
  Writer w;
  w.U64(m.metric_id);
  if (kind != MessageKind::METRIC_VALUE) w.F64(m.value);
  return w.Take();
}

MetricOpMsg DecodeMetricOp(MessageKind kind, const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  MetricOpMsg m;
  m.metric_id = r.U64();
  if (kind != MessageKind::METRIC_VALUE) m.value = r.F64();
  return m;
}

}  // namespace pybackend::ipc
