#include "backend/bls_outputs.h"

#include <cstdlib>
#include <cstring>

#include "backend/error.h"
#include "backend/json.h"
#include "backend/logging.h"

namespace pybackend {
namespace {

TRITONSERVER_Error* AllocOutput(TRITONSERVER_ResponseAllocator*, const char* tensor_name,
                                size_t byte_size, TRITONSERVER_MemoryType, int64_t, void* userp,
                                void** buffer, void** buffer_userp,
                                TRITONSERVER_MemoryType* actual_memory_type,
                                int64_t* actual_memory_type_id) {
  auto* call = static_cast<BlsOutputTarget*>(userp);
  // Host memory (the shared arena the stub maps, or the heap for small outputs) unless the
  // caller asked for GPU memory (docs/gpu.md); a pinned preference is served from the arena.
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  auto* out = new OutBuf();
  if (call->prefer_gpu && byte_size > 0) {
    try {
      std::string where = "BLS output '" + std::string(tensor_name) + "' of model '" +
                          call->callee + "' for " + call->session->log_prefix();
      *buffer = reinterpret_cast<void*>(call->session->ledger().LendDevice(
          static_cast<int>(call->preferred_device), byte_size, where, &out->gpu_ref));
      out->session = call->session;
      out->gpu = true;
      *actual_memory_type = TRITONSERVER_MEMORY_GPU;
      *actual_memory_type_id = call->preferred_device;
      *buffer_userp = out;
      return nullptr;
    } catch (const BackendError& e) {
      // No usable GPU here (no driver: a CPU-only machine) or none to spare: the output goes
      // to host memory, as without the preference (docs/compatibility.md).
      if (e.code() != TRITONSERVER_ERROR_UNAVAILABLE) {
        PB_LOG_WARN(std::string(e.what()) + "; the output goes to host memory instead");
      }
      out->gpu = false;
    }
  }
  if (byte_size <= call->inline_threshold) {
    out->heap = std::malloc(byte_size > 0 ? byte_size : 1);
    if (out->heap == nullptr) {
      delete out;
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "out of memory");
    }
    *buffer = out->heap;
  } else {
    try {
      ipc::Arena::Block b = call->session->ledger().Lend(byte_size);
      out->session = call->session;
      out->arena = true;
      out->seg = b.seg;
      out->offset = b.offset;
      *buffer = b.ptr;
    } catch (const std::exception& e) {
      delete out;
      call->delivery_failed = true;
      std::string msg = std::string("BLS output '") + tensor_name + "' of model '" + call->callee +
                        "' (" + std::to_string(byte_size) +
                        " bytes) does not fit in shared memory: " + e.what();
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, msg.c_str());
    }
  }
  *buffer_userp = out;
  return nullptr;
}

TRITONSERVER_Error* ReleaseOutput(TRITONSERVER_ResponseAllocator*, void*, void* buffer_userp,
                                  size_t, TRITONSERVER_MemoryType, int64_t) {
  auto* out = static_cast<OutBuf*>(buffer_userp);
  if (out == nullptr) return nullptr;
  if (out->heap != nullptr) std::free(out->heap);
  // Never handed to the stub (no response named it, or it did not go out): ours to take back.
  if (out->arena && !out->handed) out->session->ledger().Reclaim(out->seg, out->offset);
  if (out->gpu && !out->handed) out->session->ledger().ReleaseHold(out->gpu_ref.hold);
  delete out;
  return nullptr;
}

}  // namespace

TRITONSERVER_ResponseAllocator* BlsAllocator() {
  // One allocator for the process: it only forwards to the call named by userp.
  static TRITONSERVER_ResponseAllocator* allocator = [] {
    TRITONSERVER_ResponseAllocator* a = nullptr;
    Check(TRITONSERVER_ResponseAllocatorNew(&a, AllocOutput, ReleaseOutput, nullptr),
          "TRITONSERVER_ResponseAllocatorNew");
    return a;
  }();
  return allocator;
}

namespace {

std::string ParametersJson(TRITONSERVER_InferenceResponse* resp) {
  uint32_t count = 0;
  if (TakeMessage(TRITONSERVER_InferenceResponseParameterCount(resp, &count)) != "" || count == 0) {
    return "";
  }
  json::Value obj = json::Value::Object();
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    if (!TakeMessage(TRITONSERVER_InferenceResponseParameter(resp, i, &name, &type, &value))
             .empty() ||
        value == nullptr) {
      continue;
    }
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        obj.Set(name, json::Value(static_cast<const char*>(value)));
        break;
      case TRITONSERVER_PARAMETER_INT:
        obj.Set(name, json::Value(*static_cast<const int64_t*>(value)));
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        obj.Set(name, json::Value(*static_cast<const bool*>(value)));
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        obj.Set(name, json::Value(*static_cast<const double*>(value)));
        break;
      default:
        break;  // bytes parameters have no pb_utils form
    }
  }
  return obj.Dump();
}

}  // namespace

std::vector<OutBuf*> WriteBlsResponse(ipc::BlsResponseEncoder& enc,
                                      TRITONSERVER_InferenceResponse* resp) {
  std::vector<OutBuf*> named;
  TRITONSERVER_Error* err = TRITONSERVER_InferenceResponseError(resp);  // owned by resp
  if (err != nullptr) {
    enc.ErrorResponse(TRITONSERVER_ErrorCode(err), TRITONSERVER_ErrorMessage(err));
    return named;
  }
  uint32_t count = 0;
  std::string count_err = TakeMessage(TRITONSERVER_InferenceResponseOutputCount(resp, &count));
  if (!count_err.empty()) {
    enc.ErrorResponse(TRITONSERVER_ERROR_INTERNAL, "cannot read the BLS response: " + count_err);
    return named;
  }
  enc.BeginResponse(ParametersJson(resp));
  uint32_t written = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint64_t ndim = 0;
    const void* base = nullptr;
    size_t size = 0;
    TRITONSERVER_MemoryType mem;
    int64_t mem_id;
    void* userp = nullptr;
    std::string e = TakeMessage(TRITONSERVER_InferenceResponseOutput(
        resp, i, &name, &dtype, &shape, &ndim, &base, &size, &mem, &mem_id, &userp));
    if (!e.empty()) {
      PB_LOG_ERROR("BLS: cannot read output " + std::to_string(i) + ": " + e);
      continue;
    }
    auto* out = static_cast<OutBuf*>(userp);
    const ipc::TensorHead head{name, static_cast<uint8_t>(dtype), shape,
                               static_cast<uint32_t>(ndim), size};
    if (out != nullptr && out->gpu) {
      enc.GpuTensor(head, out->gpu_ref);
      named.push_back(out);
    } else if (out != nullptr && out->arena) {
      enc.ArenaTensor(head, ipc::Location::BACKEND_ARENA, out->seg, out->offset);
      named.push_back(out);
    } else {
      uint8_t* dst = enc.InlineTensor(head);
      if (size > 0 && base != nullptr && mem != TRITONSERVER_MEMORY_GPU) {
        std::memcpy(dst, base, size);
      } else if (size > 0) {
        std::memset(dst, 0, size);  // not reachable with our allocator
      }
    }
    ++written;
  }
  enc.EndResponse(written);
  return named;
}

}  // namespace pybackend
