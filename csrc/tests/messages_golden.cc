// The C++ half of the golden-bytes test (tests/ipc/test_messages_golden.py): each stdin line
// is `decode KIND HEX` (a body the Python codec encoded; prints the fields the C++ decoder
// read, as JSON) or `encode KIND JSON` (fields; prints the body the C++ encoder wrote, as
// hex). One output line per input line; `error: ...` when a body or a request is refused.
// Only the message layer (ipc/messages/*) is used: what the handlers in csrc/backend call.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "backend/json.h"
#include "ipc/codec.h"
#include "ipc/messages/bls.h"
#include "ipc/messages/execute.h"
#include "ipc/messages/free.h"
#include "ipc/messages/rpc.h"
#include "ipc/messages/session.h"

namespace {

using pybackend::json::Value;
namespace ipc = pybackend::ipc;

std::string Hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}
std::string Hex(const std::vector<uint8_t>& v) { return Hex(v.data(), v.size()); }

std::vector<uint8_t> Unhex(const std::string& s) {
  if (s.size() % 2 != 0) throw std::runtime_error("odd hex length");
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::stoi(s.substr(2 * i, 2), nullptr, 16);
  return out;
}

const Value& Get(const Value& obj, const char* key) {
  const Value* v = obj.Find(key);
  if (v == nullptr) throw std::runtime_error(std::string("missing field ") + key);
  return *v;
}
uint64_t U(const Value& obj, const char* key) {
  return static_cast<uint64_t>(Get(obj, key).AsInt());
}

Value Blocks(const ipc::BlockRefs& refs) {
  Value out = Value::Array();
  for (uint32_t i = 0; i < refs.size(); ++i) {
    Value pair = Value::Array();
    pair.Push(static_cast<uint64_t>(refs.seg(i)));
    pair.Push(refs.offset(i));
    out.Push(std::move(pair));
  }
  return out;
}

ipc::BlockList BlockListOf(const Value& v) {
  ipc::BlockList out;
  for (const Value& pair : v.items()) {
    out.emplace_back(static_cast<uint32_t>(pair.items()[0].AsInt()),
                     static_cast<uint64_t>(pair.items()[1].AsInt()));
  }
  return out;
}

Value Correlation(const ipc::CorrelationId& c) {
  if (c.is_string) return Value(std::string(c.str));
  return Value(c.u64);
}

Value Tensor(const ipc::TensorDesc& t) {
  Value v = Value::Object();
  v.Set("name", t.name);
  v.Set("dtype", static_cast<int64_t>(t.dtype));
  v.Set("location", static_cast<int64_t>(t.location));
  Value dims = Value::Array();
  for (int64_t d : t.dims) dims.Push(d);
  v.Set("dims", std::move(dims));
  v.Set("byte_size", t.byte_size);
  switch (t.location) {
    case ipc::Location::INLINE:
      v.Set("data", Hex(t.inline_data, t.byte_size));
      break;
    case ipc::Location::GPU_IPC: {
      Value g = Value::Object();
      g.Set("owner", static_cast<int64_t>(t.gpu.owner));
      g.Set("device", static_cast<int64_t>(t.gpu.device));
      g.Set("hold", t.gpu.hold);
      g.Set("handle", Hex(t.gpu.handle.data(), t.gpu.handle.size()));
      g.Set("offset", t.gpu.offset);
      v.Set("gpu", std::move(g));
      break;
    }
    default:
      v.Set("seg", static_cast<uint64_t>(t.seg));
      v.Set("offset", t.offset);
  }
  return v;
}

Value Response(const ipc::ResponseBody& b) {
  Value v = Value::Object();
  if (b.has_error) {
    Value e = Value::Array();
    e.Push(static_cast<uint64_t>(b.error_code));
    e.Push(b.error_message);
    v.Set("error", std::move(e));
    if (b.fails_request) v.Set("fails", Value(true));
  } else {
    v.Set("error", Value());
  }
  v.Set("parameters", b.parameters);
  Value outs = Value::Array();
  for (const auto& t : b.outputs) outs.Push(Tensor(t));
  v.Set("outputs", std::move(outs));
  return v;
}

// Writes tensor `t` (Tensor()'s JSON shape) with the encoder's tensor calls.
void PutTensor(ipc::BodyEncoder& enc, const Value& t, std::vector<int64_t>* dims) {
  dims->clear();
  for (const Value& d : Get(t, "dims").items()) dims->push_back(d.AsInt());
  const std::string& name = Get(t, "name").AsString();
  ipc::TensorHead head{name, static_cast<uint8_t>(U(t, "dtype")), dims->data(),
                       static_cast<uint32_t>(dims->size()), U(t, "byte_size")};
  auto loc = static_cast<ipc::Location>(U(t, "location"));
  if (loc == ipc::Location::INLINE) {
    std::vector<uint8_t> data = Unhex(Get(t, "data").AsString());
    uint8_t* dst = enc.InlineTensor(head);
    if (!data.empty()) std::memcpy(dst, data.data(), data.size());
  } else if (loc == ipc::Location::GPU_IPC) {
    const Value& g = Get(t, "gpu");
    ipc::GpuRef ref;
    ref.owner = static_cast<ipc::Owner>(U(g, "owner"));
    ref.device = static_cast<uint32_t>(U(g, "device"));
    ref.hold = U(g, "hold");
    std::vector<uint8_t> handle = Unhex(Get(g, "handle").AsString());
    std::memcpy(ref.handle.data(), handle.data(), ref.handle.size());
    ref.offset = U(g, "offset");
    enc.GpuTensor(head, ref);
  } else {
    enc.ArenaTensor(head, loc, static_cast<uint32_t>(U(t, "seg")), U(t, "offset"));
  }
}

Value DecodeResult(const std::vector<uint8_t>& body) {
  ipc::ResultDecoder dec(body);
  Value v = Value::Object();
  if (dec.batch_error()) {
    Value e = Value::Array();
    e.Push(static_cast<uint64_t>(dec.error_code()));
    e.Push(dec.error_message());
    v.Set("error", std::move(e));
    return v;
  }
  v.Set("error", Value());
  v.Set("async_seq", static_cast<uint64_t>(dec.async_seq()));
  Value items = Value::Array();
  for (uint32_t i = 0; i < dec.size(); ++i) {
    ipc::ResultDecoder::Item it = dec.NextItem();
    Value item = Value::Array();
    item.Push(static_cast<int64_t>(it.kind));
    item.Push(static_cast<uint64_t>(it.release_flags));
    item.Push(it.kind == ipc::ResultKind::RESPONSE ? Response(dec.Response()) : Value());
    items.Push(std::move(item));
  }
  v.Set("items", std::move(items));
  v.Set("freed", Blocks(dec.Freed()));
  return v;
}

Value DecodeBls(const std::vector<uint8_t>& body) {
  ipc::BlsExecMsg m;
  ipc::DecodeBlsExec(body, &m);
  Value v = Value::Object();
  v.Set("model_name", m.model_name);
  v.Set("model_version", m.model_version);
  v.Set("decoupled", m.decoupled);
  v.Set("request_id", m.request_id);
  v.Set("correlation_id", Correlation(m.correlation_id));
  v.Set("flags", static_cast<uint64_t>(m.flags));
  v.Set("timeout_us", m.timeout_us);
  v.Set("preferred_memory", static_cast<int64_t>(m.preferred_memory));
  v.Set("preferred_device", m.preferred_device);
  v.Set("parameters", m.parameters);
  Value req = Value::Array();
  for (const auto& n : m.requested_outputs) req.Push(n);
  v.Set("requested_outputs", std::move(req));
  Value ins = Value::Array();
  for (const auto& t : m.inputs) ins.Push(Tensor(t));
  v.Set("inputs", std::move(ins));
  v.Set("parent_token", m.parent_token);
  return v;
}

Value Decode(const std::string& kind, const std::vector<uint8_t>& body) {
  Value v = Value::Object();
  if (kind == "HELLO") {
    ipc::HelloMsg m = ipc::DecodeHello(body);
    v.Set("protocol_version", static_cast<uint64_t>(m.protocol_version));
    v.Set("pid", static_cast<uint64_t>(m.pid));
    v.Set("python_version", m.python_version);
    v.Set("numpy_version", m.numpy_version);
  } else if (kind == "INIT_REPLY" || kind == "FINALIZE_REPLY") {
    v.Set("json", ipc::DecodeJson(body));
  } else if (kind == "RESULT") {
    return DecodeResult(body);
  } else if (kind == "SEGMENT_ADD") {
    ipc::SegmentAddMsg m = ipc::DecodeSegmentAdd(body);
    v.Set("owner", static_cast<int64_t>(m.owner));
    v.Set("seg", static_cast<uint64_t>(m.seg));
    v.Set("size", m.size);
  } else if (kind == "SEGMENT_DROP") {
    ipc::SegmentDropMsg m = ipc::DecodeSegmentDrop(body);
    v.Set("owner", static_cast<int64_t>(m.owner));
    v.Set("seg", static_cast<uint64_t>(m.seg));
  } else if (kind == "INDIRECT") {
    ipc::IndirectRef m = ipc::DecodeIndirect(body.data(), body.size());
    v.Set("seg", static_cast<uint64_t>(m.seg));
    v.Set("offset", m.offset);
    v.Set("length", m.length);
  } else if (kind == "FREE") {
    ipc::FreeMsg m = ipc::DecodeFree(body);
    v.Set("owner", static_cast<int64_t>(m.owner));
    v.Set("blocks", Blocks(m.blocks));
  } else if (kind == "LOG") {
    ipc::LogMsg m = ipc::DecodeLog(body);
    v.Set("level", static_cast<int64_t>(m.level));
    v.Set("line", static_cast<uint64_t>(m.line));
    v.Set("file", m.file);
    v.Set("message", m.message);
  } else if (kind == "SEND") {
    ipc::SendMsg m = ipc::DecodeSend(body);
    v.Set("token", m.token);
    v.Set("send_flags", static_cast<uint64_t>(m.send_flags));
    v.Set("response", m.has_response ? Response(m.response) : Value());
  } else if (kind == "IS_CANCELLED" || kind == "SENDER_DROPPED" || kind == "METRIC_FAMILY_DELETE") {
    v.Set("id", ipc::DecodeToken(body));
  } else if (kind == "BLS_EXEC") {
    return DecodeBls(body);
  } else if (kind == "METRIC_FAMILY_NEW") {
    ipc::MetricFamilyNewMsg m = ipc::DecodeMetricFamilyNew(body);
    v.Set("kind", static_cast<int64_t>(m.kind));
    v.Set("name", m.name);
    v.Set("description", m.description);
  } else if (kind == "METRIC_NEW") {
    ipc::MetricNewMsg m = ipc::DecodeMetricNew(body);
    v.Set("family_id", m.family_id);
    Value labels = Value::Object();
    for (const auto& [k, val] : m.labels) labels.Set(k, val);
    v.Set("labels", std::move(labels));
    if (m.has_buckets) {
      Value b = Value::Array();
      for (double x : m.buckets) b.Push(x);
      v.Set("buckets", std::move(b));
    } else {
      v.Set("buckets", Value());
    }
  } else if (kind == "METRIC_VALUE" || kind == "METRIC_INCREMENT" || kind == "METRIC_SET" ||
             kind == "METRIC_OBSERVE") {
    auto k = kind == "METRIC_VALUE" ? ipc::MessageKind::METRIC_VALUE
                                    : ipc::MessageKind::METRIC_SET;  // any kind with a value
    ipc::MetricOpMsg m = ipc::DecodeMetricOp(k, body);
    v.Set("metric_id", m.metric_id);
    if (kind != "METRIC_VALUE") v.Set("value", m.value);
  } else if (kind == "MODEL_LOAD") {
    ipc::ModelLoadMsg m = ipc::DecodeModelLoad(body);
    v.Set("model_name", m.model_name);
    v.Set("config", m.config);
    Value files = Value::Object();
    for (const auto& f : m.files) files.Set(f.path, Hex(f.data, f.size));
    v.Set("files", std::move(files));
  } else if (kind == "MODEL_UNLOAD") {
    ipc::ModelUnloadMsg m = ipc::DecodeModelUnload(body);
    v.Set("model_name", m.model_name);
    v.Set("unload_dependents", m.unload_dependents);
  } else if (kind == "MODEL_READY") {
    ipc::ModelReadyMsg m = ipc::DecodeModelReady(body);
    v.Set("model_name", m.model_name);
    v.Set("version", m.version);
  } else {
    throw std::runtime_error("no C++ decoder for " + kind);
  }
  return v;
}

std::vector<uint8_t> EncodeExecute(const Value& v) {
  ipc::ExecuteEncoder enc;
  const auto& requests = Get(v, "requests").items();
  enc.Begin(static_cast<uint32_t>(requests.size()));
  std::vector<int64_t> dims;
  for (const Value& q : requests) {
    ipc::CorrelationId corr;
    const Value& c = Get(q, "correlation_id");
    corr.is_string = c.is_string();
    if (corr.is_string) {
      corr.str = c.AsString();
    } else {
      corr.u64 = static_cast<uint64_t>(c.AsInt());
    }
    enc.RequestHead(U(q, "token"), Get(q, "request_id").AsString(), corr,
                    static_cast<uint32_t>(U(q, "flags")), U(q, "timeout_us"),
                    Get(q, "parameters").AsString(), Get(q, "trace_context").AsString());
    const auto& outs = Get(q, "requested_outputs").items();
    enc.RequestedOutputs(static_cast<uint32_t>(outs.size()));
    for (const Value& o : outs) enc.RequestedOutput(o.AsString());
    const auto& ins = Get(q, "inputs").items();
    enc.Inputs(static_cast<uint32_t>(ins.size()));
    for (const Value& t : ins) PutTensor(enc, t, &dims);
  }
  enc.Freed(BlockListOf(Get(v, "freed")));
  return enc.Take();
}

std::vector<uint8_t> EncodeBlsResponse(const Value& v) {
  ipc::BlsResponseEncoder enc(static_cast<uint32_t>(U(v, "flags")));
  const Value& r = Get(v, "response");
  if (r.is_null()) {
    enc.NoResponse();
  } else if (!Get(r, "error").is_null()) {
    const auto& e = Get(r, "error").items();
    enc.ErrorResponse(static_cast<uint32_t>(e[0].AsInt()), e[1].AsString());
  } else {
    enc.BeginResponse(Get(r, "parameters").AsString());
    std::vector<int64_t> dims;
    const auto& outs = Get(r, "outputs").items();
    for (const Value& t : outs) PutTensor(enc, t, &dims);
    enc.EndResponse(static_cast<uint32_t>(outs.size()));
  }
  return enc.Take();
}

std::vector<uint8_t> Encode(const std::string& kind, const Value& v) {
  if (kind == "INIT" || kind == "ATTACH") return ipc::EncodeJson(Get(v, "json").AsString());
  if (kind == "EXECUTE") return EncodeExecute(v);
  if (kind == "BLS_RESPONSE") return EncodeBlsResponse(v);
  if (kind == "SEGMENT_ADD") {
    return ipc::EncodeSegmentAdd(
        {static_cast<ipc::Owner>(U(v, "owner")), static_cast<uint32_t>(U(v, "seg")), U(v, "size")});
  }
  if (kind == "SEGMENT_DROP") {
    return ipc::EncodeSegmentDrop(
        {static_cast<ipc::Owner>(U(v, "owner")), static_cast<uint32_t>(U(v, "seg"))});
  }
  if (kind == "INDIRECT") {
    return ipc::EncodeIndirect(
        {static_cast<uint32_t>(U(v, "seg")), U(v, "offset"), U(v, "length")});
  }
  if (kind == "FREE") {
    return ipc::EncodeFree(static_cast<ipc::Owner>(U(v, "owner")), BlockListOf(Get(v, "blocks")));
  }
  if (kind == "REPLY") {
    const std::string& payload = Get(v, "payload").AsString();
    if (!Get(v, "ok").AsBool()) {
      return ipc::EncodeErrorReply(static_cast<uint32_t>(U(v, "code")),
                                   Get(v, "message").AsString());
    }
    if (payload == "empty") return ipc::EncodeEmptyReply();
    if (payload == "flag") return ipc::EncodeFlagReply(Get(v, "value").AsBool());
    if (payload == "id") return ipc::EncodeIdReply(U(v, "value"));
    if (payload == "value") return ipc::EncodeValueReply(Get(v, "value").AsDouble());
    throw std::runtime_error("unknown REPLY payload " + payload);
  }
  throw std::runtime_error("no C++ encoder for " + kind);
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    size_t a = line.find(' ');
    size_t b = line.find(' ', a + 1);
    std::string op = line.substr(0, a);
    std::string kind = line.substr(a + 1, b - a - 1);
    std::string arg = b == std::string::npos ? "" : line.substr(b + 1);
    try {
      if (op == "decode") {
        std::cout << Decode(kind, Unhex(arg)).Dump() << "\n";
      } else if (op == "encode") {
        std::cout << Hex(Encode(kind, Value::Parse(arg))) << "\n";
      } else {
        std::cout << "error: unknown op " << op << "\n";
      }
    } catch (const std::exception& e) {
      std::cout << "error: " << e.what() << "\n";
    }
    std::cout.flush();
  }
  return 0;
}
