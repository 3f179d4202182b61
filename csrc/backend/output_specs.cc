#include "backend/output_specs.h"

#include <cstring>

#include "triton/tritonserver.h"

namespace pybackend {
namespace {

std::string ConfigTypeOf(uint8_t dtype) {
  auto t = static_cast<TRITONSERVER_DataType>(dtype);
  if (t == TRITONSERVER_TYPE_BYTES) return "TYPE_STRING";
  return std::string("TYPE_") + TRITONSERVER_DataTypeString(t);
}

std::string ShapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

int64_t DimOf(const json::Value& v) {
  if (v.is_number()) return v.AsInt();
  if (v.is_string()) return std::stoll(v.AsString());
  return -1;
}

}  // namespace

void OutputSpecs::Build(const json::Value& config, int64_t max_batch_size) {
  specs_.clear();
  names_.clear();
  batched_ = max_batch_size > 0;
  const json::Value* outputs = config.Find("output");
  if (outputs == nullptr || !outputs->is_array()) return;
  for (const json::Value& o : outputs->items()) {
    std::string name = o.GetString("name");
    if (name.empty()) continue;
    Spec spec;
    spec.data_type = o.GetString("data_type");
    if (const json::Value* dims = o.Find("dims"); dims != nullptr && dims->is_array()) {
      for (const json::Value& d : dims->items()) spec.dims.push_back(DimOf(d));
    }
    spec.reshaped = o.Find("reshape") != nullptr;
    specs_[name] = std::move(spec);
    names_.push_back(name);
  }
}

std::string OutputSpecs::Check(const ipc::TensorDesc& t, const std::string& instance) const {
  if (specs_.empty()) return "";
  const std::string what = "output '" + t.name + "' of model instance '" + instance + "'";
  auto it = specs_.find(t.name);
  if (it == specs_.end()) {
    std::string declared;
    for (const auto& n : names_) declared += (declared.empty() ? "'" : ", '") + n + "'";
    return what + " is not declared in the model configuration (it declares " + declared +
           "): return only declared outputs, or add it to config.pbtxt";
  }
  const Spec& spec = it->second;
  std::string actual = ConfigTypeOf(t.dtype);
  if (!spec.data_type.empty() && actual != spec.data_type) {
    return what + " has data type " + actual + " but the model configuration declares " +
           spec.data_type + ": convert the array (e.g. numpy astype) or fix config.pbtxt";
  }
  if (spec.reshaped) return "";
  std::vector<int64_t> want = spec.dims;
  if (batched_) want.insert(want.begin(), -1);
  bool ok = want.size() == t.dims.size();
  for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || want[i] == t.dims[i];
  if (!ok) {
    return what + " has shape " + ShapeText(t.dims) + " but the model configuration declares " +
           ShapeText(spec.dims) + (batched_ ? " after the batch dimension" : std::string()) +
           " (-1: any size): reshape the array or fix config.pbtxt";
  }
  return "";
}

std::string CheckBytesPayload(const uint8_t* data, uint64_t size, uint64_t count) {
  uint64_t offset = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (size - offset < 4) {
      return "element " + std::to_string(i) + " of " + std::to_string(count) +
             " has no complete length prefix (" + std::to_string(size - offset) + " bytes left)";
    }
    uint32_t len;
    std::memcpy(&len, data + offset, 4);
    offset += 4;
    if (len > size - offset) {
      return "element " + std::to_string(i) + " claims " + std::to_string(len) +
             " bytes but only " + std::to_string(size - offset) + " follow";
    }
    offset += len;
  }
  if (offset != size) {
    return std::to_string(size - offset) + " bytes follow the " + std::to_string(count) +
           " elements its shape holds";
  }
  return "";
}

}  // namespace pybackend
