#include "backend/response_writer.h"

#include <cstring>

#include "backend/error.h"
#include "backend/gpu_transfer.h"
#include "backend/json.h"
#include "backend/logging.h"
#include "backend/parallel_copy.h"

namespace pybackend {
namespace {

std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// Checks a serialized BYTES tensor: `count` elements, each a u32 length and that many
// bytes, filling exactly `size` bytes. Returns "" or what is wrong.
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

// Checks the byte size of a fixed-size tensor against its shape and type.
void CheckByteSize(const ipc::TensorDesc& t, const std::string& instance) {
  auto dtype = static_cast<TRITONSERVER_DataType>(t.dtype);
  if (dtype == TRITONSERVER_TYPE_BYTES) return;
  uint32_t elem = TRITONSERVER_DataTypeByteSize(dtype);
  if (elem == 0) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG, "output '" + t.name + "' of model instance '" + instance +
                                              "' has invalid data type " + std::to_string(t.dtype));
  }
  uint64_t count = 1;
  for (int64_t d : t.dims) {
    if (d < 0) {
      Throw(TRITONSERVER_ERROR_INVALID_ARG, "output '" + t.name + "' of model instance '" +
                                                instance + "' has a negative dimension in shape " +
                                                ShapeString(t.dims));
    }
    count *= static_cast<uint64_t>(d);
  }
  if (count * elem != t.byte_size) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG,
          "output '" + t.name + "' of model instance '" + instance + "' holds " +
              std::to_string(t.byte_size) + " bytes but shape " + ShapeString(t.dims) + " of " +
              TRITONSERVER_DataTypeString(dtype) + " needs " + std::to_string(count * elem));
  }
}

void SetParameters(TRITONBACKEND_Response* response, const std::string& text) {
  if (text.empty()) return;
  json::Value params = json::Value::Parse(text);
  if (!params.is_object()) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG, "response parameters must be a JSON object");
  }
  for (const auto& [key, v] : params.members()) {
    const char* k = key.c_str();
    switch (v.type()) {
      case json::Value::Type::kString:
        Check(TRITONBACKEND_ResponseSetStringParameter(response, k, v.AsString().c_str()),
              "TRITONBACKEND_ResponseSetStringParameter");
        break;
      case json::Value::Type::kBool:
        Check(TRITONBACKEND_ResponseSetBoolParameter(response, k, v.AsBool()),
              "TRITONBACKEND_ResponseSetBoolParameter");
        break;
      case json::Value::Type::kInt:
        Check(TRITONBACKEND_ResponseSetIntParameter(response, k, v.AsInt()),
              "TRITONBACKEND_ResponseSetIntParameter");
        break;
      case json::Value::Type::kDouble:
        Check(TRITONBACKEND_ResponseSetDoubleParameter(response, k, v.AsDouble()),
              "TRITONBACKEND_ResponseSetDoubleParameter");
        break;
      default:
        Throw(TRITONSERVER_ERROR_INVALID_ARG,
              "response parameter '" + key + "' must be a string, integer, float or bool");
    }
  }
}

void AddOutput(TRITONBACKEND_Response* response, const ipc::TensorDesc& t, StubSession& session) {
  const std::string& instance = session.options().instance_name;
  CheckByteSize(t, instance);
  // Resolve the source first: a bad reference must not leave a half-made output behind.
  const uint8_t* src = nullptr;
  std::shared_ptr<ipc::Mapping> hold;  // keeps a stub segment mapped while we copy
  std::string error;
  bool on_gpu = false;  // the stub's GPU memory (CUDA IPC)
  switch (t.location) {
    case ipc::Location::GPU_IPC:
      if (static_cast<TRITONSERVER_DataType>(t.dtype) == TRITONSERVER_TYPE_BYTES) {
        Throw(TRITONSERVER_ERROR_INVALID_ARG, "output '" + t.name + "' of model instance '" +
                                                  instance +
                                                  "': a BYTES tensor cannot live in GPU memory");
      }
      on_gpu = true;
      break;
    case ipc::Location::INLINE:
      src = t.inline_data;
      break;
    case ipc::Location::STUB_ARENA:
      hold = session.ledger().MapStub(t.seg, t.offset, t.byte_size, &error);
      if (!hold) Throw(TRITONSERVER_ERROR_INTERNAL, "output '" + t.name + "': " + error);
      src = hold->base + t.offset;
      break;
    case ipc::Location::BACKEND_ARENA:
      src = session.ledger().ResolveLent(t.seg, t.offset, t.byte_size);
      if (src == nullptr) {
        Throw(TRITONSERVER_ERROR_INTERNAL,
              "output '" + t.name + "' names bytes [" + std::to_string(t.offset) + ", " +
                  std::to_string(t.offset + t.byte_size) + ") of backend segment " +
                  std::to_string(t.seg) + ", which do not exist");
      }
      break;
    default:
      Throw(TRITONSERVER_ERROR_UNSUPPORTED, "output '" + t.name + "' has an unsupported location");
  }
  if (static_cast<TRITONSERVER_DataType>(t.dtype) == TRITONSERVER_TYPE_BYTES) {
    // Clients and Triton's frontends parse these length prefixes: never pass on a bad one.
    uint64_t count = 1;
    for (int64_t d : t.dims) count *= static_cast<uint64_t>(d < 0 ? 0 : d);
    std::string bad = CheckBytesPayload(src, t.byte_size, count);
    if (!bad.empty()) {
      Throw(TRITONSERVER_ERROR_INTERNAL, "BYTES output '" + t.name + "' of model instance '" +
                                             instance + "' is malformed: " + bad);
    }
  }
  TRITONBACKEND_Output* output = nullptr;
  Check(TRITONBACKEND_ResponseOutput(response, &output, t.name.c_str(),
                                     static_cast<TRITONSERVER_DataType>(t.dtype), t.dims.data(),
                                     static_cast<uint32_t>(t.dims.size())),
        nullptr);
  void* dst = nullptr;
  // A GPU output asks for a buffer on its own device: then one device-to-device copy; Triton
  // may still hand out host memory (an HTTP/gRPC client without CUDA shared memory): then one
  // device-to-host copy.
  TRITONSERVER_MemoryType mem = on_gpu ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = on_gpu ? static_cast<int64_t>(t.gpu.device) : 0;
  Check(TRITONBACKEND_OutputBuffer(output, &dst, t.byte_size, &mem, &mem_id), nullptr);
  if (t.byte_size == 0) return;
  if (dst == nullptr) {
    Throw(TRITONSERVER_ERROR_INTERNAL, "output '" + t.name + "': Triton gave no buffer");
  }
  if (on_gpu) {
    CopyGpuOutput(session, t, dst, mem, mem_id);
  } else if (mem == TRITONSERVER_MEMORY_GPU) {
    CopyHostToGpu(session, t.name, dst, mem_id, src, t.byte_size);
  } else {
    CopyBytesToFresh(dst, src, t.byte_size);
  }
}

}  // namespace

bool SendErrorResponse(TRITONBACKEND_Response* response, TRITONSERVER_Error_Code code,
                       const std::string& message, uint32_t send_flags) {
  TRITONSERVER_Error* err = TRITONSERVER_ErrorNew(code, message.c_str());
  std::string send_err = TakeMessage(TRITONBACKEND_ResponseSend(response, send_flags, err));
  TRITONSERVER_ErrorDelete(err);
  if (send_err.empty()) return true;
  PB_LOG_ERROR("failed to send an error response: " + send_err);
  return false;
}

bool SendResponse(TRITONBACKEND_Response* response, const ipc::ResponseBody& body,
                  const RequestState& st, StubSession& session, uint32_t send_flags) {
  if (body.has_error) {
    auto code = static_cast<TRITONSERVER_Error_Code>(body.error_code);
    if (body.error_code > TRITONSERVER_ERROR_CANCELLED) code = TRITONSERVER_ERROR_INTERNAL;
    // The model's own error response is its answer: the original reports such a request as
    // a success in the statistics (tests/conformance/config_features/test_request_statistics).
    return SendErrorResponse(response, code, body.error_message, send_flags) && !body.fails_request;
  }
  try {
    SetParameters(response, body.parameters);
    for (const ipc::TensorDesc& t : body.outputs) {
      // Only what Triton asked for (every declared output when the client named none);
      // a model that declares no outputs sends none, as the original's responses do.
      if (st.requested_outputs.count(t.name) == 0) continue;
      AddOutput(response, t, session);
    }
  } catch (const std::exception& e) {
    TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
    if (auto* be = dynamic_cast<const BackendError*>(&e)) code = be->code();
    SendErrorResponse(response, code, e.what(), send_flags);
    return false;
  }
  std::string err = TakeMessage(TRITONBACKEND_ResponseSend(response, send_flags, nullptr));
  if (!err.empty()) {
    PB_LOG_ERROR(session.log_prefix() + "failed to send a response: " + err);
    return false;
  }
  return true;
}

}  // namespace pybackend
