#include "backend/request_encoder.h"

#include <cstring>

#include "backend/error.h"
#include "backend/json.h"
#include "backend/parallel_copy.h"
#include "cuda/device_holds.h"
#include "cuda/driver.h"
#include "triton/tritonserver_infer.h"

namespace pybackend {
namespace {

// Room kept free in a message for the rest of the body when deciding to inline a tensor.
constexpr uint64_t kInlineSlack = 4096;

std::string ParametersJson(TRITONBACKEND_Request* req) {
  uint32_t count = 0;
  Check(TRITONBACKEND_RequestParameterCount(req, &count), "TRITONBACKEND_RequestParameterCount");
  if (count == 0) return "{}";
  json::Value params = json::Value::Object();
  for (uint32_t i = 0; i < count; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    Check(TRITONBACKEND_RequestParameter(req, i, &key, &type, &value),
          "TRITONBACKEND_RequestParameter");
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        params.Set(key, json::Value(static_cast<const char*>(value)));
        break;
      case TRITONSERVER_PARAMETER_INT:
        params.Set(key, json::Value(*static_cast<const int64_t*>(value)));
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        params.Set(key, json::Value(*static_cast<const bool*>(value)));
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        params.Set(key, json::Value(*static_cast<const double*>(value)));
        break;
      default:
        break;  // BYTES parameters have no JSON form; the original skips them too
    }
  }
  return params.Dump();
}

struct InputBuffer {
  const void* data = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
};

std::string InputWhere(const EncodeContext& ctx, const char* name) {
  return "model instance '" + ctx.instance_name + "', input '" + name + "'";
}

// FORCE_CPU_ONLY_INPUT_TENSORS "no" and the whole input in one GPU buffer: the stub gets a
// GPU tensor. Triton's own memory (its CUDA pool, an ensemble step's output) is shared as it
// is; memory CUDA IPC cannot share again (a client's CUDA shared memory, which Triton itself
// imported) is first copied into device memory lent to the stub.
void EncodeGpuInput(ipc::ExecuteEncoder& enc, const char* name, TRITONSERVER_DataType dtype,
                    const int64_t* shape, uint32_t ndim, uint64_t byte_size, const InputBuffer& b,
                    EncodeContext& ctx) {
  const std::string where = InputWhere(ctx, name);
  int device = static_cast<int>(b.mem_id);
  ipc::GpuRef ref;
  if (!ctx.ledger->ShareDevice(device, b.data, where, &ref)) {
    cuda::CUdeviceptr copy = ctx.ledger->LendDevice(device, byte_size, where, &ref);
    ctx.loan.gpu_holds.push_back(ref.hold);
    cuda::Copy(cuda::Driver::Get(where), device, cuda::Direction::kDeviceToDevice,
               reinterpret_cast<void*>(copy), b.data, byte_size, where);
    ctx.session->CountGpuCopy(cuda::Direction::kDeviceToDevice);
  }
  enc.GpuTensor({name, static_cast<uint8_t>(dtype), shape, ndim, byte_size}, ref);
}

void EncodeInput(ipc::ExecuteEncoder& enc, TRITONBACKEND_Input* input, EncodeContext& ctx) {
  const char* name = nullptr;
  TRITONSERVER_DataType dtype;
  const int64_t* shape = nullptr;
  uint32_t ndim = 0;
  uint64_t byte_size = 0;
  uint32_t buffers = 0;
  Check(TRITONBACKEND_InputProperties(input, &name, &dtype, &shape, &ndim, &byte_size, &buffers),
        "TRITONBACKEND_InputProperties");

  // Where Triton holds the input (one buffer mostly; several for a batch gathered by Triton).
  InputBuffer one;
  std::vector<InputBuffer> many;
  for (uint32_t i = 0; i < buffers; ++i) {
    InputBuffer b;
    b.mem = ctx.force_cpu_inputs ? TRITONSERVER_MEMORY_CPU : TRITONSERVER_MEMORY_GPU;
    Check(TRITONBACKEND_InputBuffer(input, i, &b.data, &b.size, &b.mem, &b.mem_id),
          "TRITONBACKEND_InputBuffer");
    if (buffers == 1) {
      one = b;
    } else {
      many.push_back(b);
    }
  }
  if (buffers == 1) many.push_back(one);
  if (!ctx.force_cpu_inputs && buffers == 1 && one.mem == TRITONSERVER_MEMORY_GPU &&
      dtype != TRITONSERVER_TYPE_BYTES && ctx.session != nullptr && one.size == byte_size &&
      byte_size > 0) {
    EncodeGpuInput(enc, name, dtype, shape, ndim, byte_size, one, ctx);
    return;
  }

  bool inline_it = byte_size <= ctx.inline_threshold &&
                   enc.size() + byte_size + kInlineSlack <= ipc::MAX_INLINE_BODY;
  const ipc::TensorHead head{name, static_cast<uint8_t>(dtype), shape, ndim, byte_size};
  uint8_t* dst = nullptr;
  if (inline_it) {
    dst = enc.InlineTensor(head);  // filled below, before anything else is written
  } else {
    ipc::Arena::Block b;
    try {
      // The batch's earlier inputs cannot come back while it waits for room.
      b = ctx.ledger->Lend(byte_size, ctx.loan.blocks);
    } catch (const ipc::ArenaError& e) {
      Throw(TRITONSERVER_ERROR_UNAVAILABLE,
            "no shared memory for input '" + std::string(name) + "' (" + std::to_string(byte_size) +
                " bytes) of model instance '" + ctx.instance_name + "': " + e.what());
    }
    ctx.loan.blocks.push_back(b);
    enc.ArenaTensor(head, ipc::Location::BACKEND_ARENA, b.seg, b.offset);
    dst = b.ptr;
  }

  uint64_t copied = 0;
  for (const InputBuffer& b : many) {
    if (b.size > byte_size - copied) {
      Throw(TRITONSERVER_ERROR_INVALID_ARG, "input '" + std::string(name) +
                                                "' buffers hold more than its byte size " +
                                                std::to_string(byte_size));
    }
    if (b.size > 0 && b.mem == TRITONSERVER_MEMORY_GPU) {
      // On a GPU (a client's CUDA shared memory, an ensemble step's GPU output): one copy
      // to host memory, as the original does with FORCE_CPU_ONLY_INPUT_TENSORS "yes".
      if (ctx.session == nullptr) {
        Throw(TRITONSERVER_ERROR_UNSUPPORTED,
              "input '" + std::string(name) + "' is in GPU memory, which this call cannot read");
      }
      const std::string where = InputWhere(ctx, name);
      cuda::Copy(cuda::Driver::Get(where), static_cast<int>(b.mem_id),
                 cuda::Direction::kDeviceToHost, dst + copied, b.data, b.size, where);
      ctx.session->CountGpuCopy(cuda::Direction::kDeviceToHost);
    } else if (b.size > 0) {
      CopyBytes(dst + copied, b.data, b.size);
    }
    copied += b.size;
  }
  if (copied != byte_size) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG, "input '" + std::string(name) + "' buffers hold " +
                                              std::to_string(copied) + " bytes, expected " +
                                              std::to_string(byte_size));
  }
  if (dtype == TRITONSERVER_TYPE_BYTES) {
    uint64_t expected = 1;
    for (uint32_t d = 0; d < ndim; ++d) expected *= static_cast<uint64_t>(shape[d]);
    ValidateBytesInput(dst, byte_size, expected, name);
  }
}

// The request's OpenTelemetry context, "" when the server does not trace it (or traces it
// in its own mode, which has none); the trace owns the text, which the caller copies at once.
std::string_view TraceContext(TRITONBACKEND_Request* req) {
  TRITONSERVER_InferenceTrace* trace = nullptr;
  if (!TakeMessage(TRITONBACKEND_RequestTrace(req, &trace)).empty() || trace == nullptr) return {};
  const char* context = nullptr;
  std::string err = TakeMessage(TRITONSERVER_InferenceTraceContext(trace, &context));
  if (!err.empty() || context == nullptr) return {};
  return context;
}
}  // namespace

void ValidateBytesInput(const uint8_t* data, uint64_t size, uint64_t expected,
                        const std::string& name) {
  uint64_t offset = 0;
  uint64_t count = 0;
  while (offset < size) {
    uint64_t left = size - offset;
    if (left < 4) {
      Throw(TRITONSERVER_ERROR_INVALID_ARG, "incomplete string length for inference input '" +
                                                name + "', expecting 4 bytes but only " +
                                                std::to_string(left) + " bytes available");
    }
    uint32_t len;
    std::memcpy(&len, data + offset, 4);
    offset += 4;
    left -= 4;
    if (len > left) {
      Throw(TRITONSERVER_ERROR_INVALID_ARG, "incomplete string data for inference input '" + name +
                                                "', expecting string of length " +
                                                std::to_string(len) + " but only " +
                                                std::to_string(left) + " bytes available");
    }
    offset += len;
    ++count;
  }
  if (count != expected) {
    Throw(TRITONSERVER_ERROR_INVALID_ARG, "expected " + std::to_string(expected) +
                                              " strings for inference input '" + name + "', got " +
                                              std::to_string(count));
  }
}

void EncodeRequest(ipc::ExecuteEncoder& enc, RequestState& st, EncodeContext& ctx) {
  TRITONBACKEND_Request* req = st.request;

  const char* id = nullptr;
  Check(TRITONBACKEND_RequestId(req, &id), "TRITONBACKEND_RequestId");

  ipc::CorrelationId corr;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestCorrelationId(req, &corr.u64);
  if (err != nullptr) {
    // The id is a string: the u64 call refuses it.
    TRITONSERVER_ErrorDelete(err);
    const char* corr_s = nullptr;
    Check(TRITONBACKEND_RequestCorrelationIdString(req, &corr_s),
          "TRITONBACKEND_RequestCorrelationIdString");
    corr.is_string = true;
    corr.str = corr_s != nullptr ? corr_s : "";
  }

  uint32_t flags = 0;
  Check(TRITONBACKEND_RequestFlags(req, &flags), "TRITONBACKEND_RequestFlags");
  uint64_t timeout = 0;
  Check(TRITONBACKEND_InferenceRequestTimeoutMicroseconds(req, &timeout),
        "TRITONBACKEND_InferenceRequestTimeoutMicroseconds");
  enc.RequestHead(st.token, id != nullptr ? id : "", corr, flags, timeout, ParametersJson(req),
                  TraceContext(req));

  uint32_t n_out = 0;
  Check(TRITONBACKEND_RequestOutputCount(req, &n_out), "TRITONBACKEND_RequestOutputCount");
  enc.RequestedOutputs(n_out);
  st.requested_outputs.clear();
  for (uint32_t i = 0; i < n_out; ++i) {
    const char* out_name = nullptr;
    Check(TRITONBACKEND_RequestOutputName(req, i, &out_name), "TRITONBACKEND_RequestOutputName");
    enc.RequestedOutput(out_name);
    st.requested_outputs.insert(out_name);
  }

  uint32_t n_in = 0;
  Check(TRITONBACKEND_RequestInputCount(req, &n_in), "TRITONBACKEND_RequestInputCount");
  enc.Inputs(n_in);
  for (uint32_t i = 0; i < n_in; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    Check(TRITONBACKEND_RequestInputByIndex(req, i, &input), "TRITONBACKEND_RequestInputByIndex");
    EncodeInput(enc, input, ctx);
  }
}

}  // namespace pybackend
