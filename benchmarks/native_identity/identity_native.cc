// In-process native backend: the floor the Python backends are measured against.
//
// It does in C++ what each benchmark model.py does in Python, with no process hop, so the
// difference between it and a Python backend is that backend's own overhead. The model's
// config parameter "mode" picks the work:
//   identity  OUTPUTk = INPUTk for every input (any dtype, BYTES included)
//   add_sub   OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32)
//   decode    OUTPUT0 (INT64 [1]) = number of strings in the BYTES INPUT0
//   decoupled INPUT0 (INT32 [1]) = n; sends n responses with OUTPUT0 (INT32 [1]) = i, then FINAL
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#ifdef BENCH_USE_PROJECT_TRITON_HEADERS
#include "triton/tritonbackend.h"  // the project's own declarations (csrc/triton)
#else
#include "triton_api.h"  // local fallback, for a checkout without csrc/triton
#endif

namespace {

enum class Mode : intptr_t { kIdentity = 1, kAddSub, kDecode, kDecoupled };

#define RETURN_IF_ERROR(expr)           \
  do {                                  \
    TRITONSERVER_Error* err__ = (expr); \
    if (err__ != nullptr) return err__; \
  } while (false)

uint64_t NowNs() {
  // Triton stamps request times with steady_clock; the statistics mix both.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TRITONSERVER_Error* Error(const std::string& msg) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, msg.c_str());
}

struct InputView {
  const char* name;
  TRITONSERVER_DataType dtype;
  const int64_t* shape;
  uint32_t dims;
  uint64_t byte_size;
  std::vector<std::pair<const char*, uint64_t>> chunks;  // Triton may split an input
};

TRITONSERVER_Error* ReadInput(TRITONBACKEND_Request* request, uint32_t index, InputView* view) {
  TRITONBACKEND_Input* input;
  uint32_t buffers;
  RETURN_IF_ERROR(TRITONBACKEND_RequestInputByIndex(request, index, &input));
  RETURN_IF_ERROR(TRITONBACKEND_InputProperties(input, &view->name, &view->dtype, &view->shape,
                                                &view->dims, &view->byte_size, &buffers));
  for (uint32_t b = 0; b < buffers; ++b) {
    const void* ptr;
    uint64_t size;
    TRITONSERVER_MemoryType mem;
    int64_t mem_id;
    RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, b, &ptr, &size, &mem, &mem_id));
    if (mem != TRITONSERVER_MEMORY_CPU) return Error("identity_native: CPU inputs only");
    view->chunks.emplace_back(static_cast<const char*>(ptr), size);
  }
  return nullptr;
}

TRITONSERVER_Error* AddOutput(TRITONBACKEND_Response* response, const std::string& name,
                              TRITONSERVER_DataType dtype, const int64_t* shape, uint32_t dims,
                              uint64_t byte_size, char** buffer) {
  TRITONBACKEND_Output* output;
  RETURN_IF_ERROR(
      TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), dtype, shape, dims));
  TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
  int64_t mem_id = 0;
  void* ptr;
  RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &ptr, byte_size, &mem, &mem_id));
  *buffer = static_cast<char*>(ptr);
  return nullptr;
}

std::string OutputName(const char* input_name) {
  std::string name(input_name);
  if (name.rfind("INPUT", 0) == 0) return "OUTPUT" + name.substr(5);
  return name + "_OUT";
}

TRITONSERVER_Error* Identity(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response) {
  uint32_t count;
  RETURN_IF_ERROR(TRITONBACKEND_RequestInputCount(request, &count));
  for (uint32_t i = 0; i < count; ++i) {
    InputView in;
    RETURN_IF_ERROR(ReadInput(request, i, &in));
    char* out;
    RETURN_IF_ERROR(
        AddOutput(response, OutputName(in.name), in.dtype, in.shape, in.dims, in.byte_size, &out));
    for (const auto& chunk : in.chunks) {
      std::memcpy(out, chunk.first, chunk.second);
      out += chunk.second;
    }
  }
  return nullptr;
}

// Gathers an input into one contiguous buffer (a copy only when Triton split it).
const char* Contiguous(const InputView& in, std::vector<char>* scratch) {
  if (in.chunks.size() == 1) return in.chunks[0].first;
  scratch->clear();
  for (const auto& chunk : in.chunks) {
    scratch->insert(scratch->end(), chunk.first, chunk.first + chunk.second);
  }
  return scratch->data();
}

TRITONSERVER_Error* AddSub(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response) {
  InputView a, b;
  RETURN_IF_ERROR(ReadInput(request, 0, &a));
  RETURN_IF_ERROR(ReadInput(request, 1, &b));
  if (a.dtype != TRITONSERVER_TYPE_FP32 || a.byte_size != b.byte_size) {
    return Error("identity_native add_sub: two FP32 inputs of one shape expected");
  }
  std::vector<char> sa, sb;
  auto pa = reinterpret_cast<const float*>(Contiguous(a, &sa));
  auto pb = reinterpret_cast<const float*>(Contiguous(b, &sb));
  char *sum, *diff;
  RETURN_IF_ERROR(AddOutput(response, "OUTPUT0", a.dtype, a.shape, a.dims, a.byte_size, &sum));
  RETURN_IF_ERROR(AddOutput(response, "OUTPUT1", a.dtype, a.shape, a.dims, a.byte_size, &diff));
  size_t n = a.byte_size / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    reinterpret_cast<float*>(sum)[i] = pa[i] + pb[i];
    reinterpret_cast<float*>(diff)[i] = pa[i] - pb[i];
  }
  return nullptr;
}

TRITONSERVER_Error* Decode(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response) {
  InputView in;
  RETURN_IF_ERROR(ReadInput(request, 0, &in));
  std::vector<char> scratch;
  const char* p = Contiguous(in, &scratch);
  int64_t strings = 0;
  for (uint64_t at = 0; at + 4 <= in.byte_size; ++strings) {
    uint32_t len;
    std::memcpy(&len, p + at, 4);
    at += 4 + len;
  }
  const int64_t shape[1] = {1};
  char* out;
  RETURN_IF_ERROR(AddOutput(response, "OUTPUT0", TRITONSERVER_TYPE_INT64, shape, 1, 8, &out));
  std::memcpy(out, &strings, 8);
  return nullptr;
}

TRITONSERVER_Error* Decoupled(TRITONBACKEND_Request* request) {
  InputView in;
  RETURN_IF_ERROR(ReadInput(request, 0, &in));
  int32_t n;
  std::memcpy(&n, in.chunks.at(0).first, 4);
  TRITONBACKEND_ResponseFactory* factory;
  RETURN_IF_ERROR(TRITONBACKEND_ResponseFactoryNew(&factory, request));
  const int64_t shape[1] = {1};
  TRITONSERVER_Error* err = nullptr;
  for (int32_t i = 0; i < n && err == nullptr; ++i) {
    TRITONBACKEND_Response* response;
    err = TRITONBACKEND_ResponseNewFromFactory(&response, factory);
    char* out;
    if (err == nullptr) {
      err = AddOutput(response, "OUTPUT0", TRITONSERVER_TYPE_INT32, shape, 1, 4, &out);
      if (err == nullptr) std::memcpy(out, &i, 4);
      err = TRITONBACKEND_ResponseSend(response, 0, err);
    }
  }
  TRITONSERVER_Error* final_err =
      TRITONBACKEND_ResponseFactorySendFlags(factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  TRITONBACKEND_ResponseFactoryDelete(factory);
  if (err != nullptr) {
    if (final_err != nullptr) TRITONSERVER_ErrorDelete(final_err);
    return err;
  }
  return final_err;
}

Mode ParseMode(const std::string& config_json) {
  // Triton normalises parameters to {"mode":{"string_value":"..."}}.
  const std::string key = "\"mode\":{\"string_value\":\"";
  size_t at = config_json.find(key);
  if (at == std::string::npos) return Mode::kIdentity;
  std::string value = config_json.substr(at + key.size());
  value = value.substr(0, value.find('"'));
  if (value == "add_sub") return Mode::kAddSub;
  if (value == "decode") return Mode::kDecode;
  if (value == "decoupled") return Mode::kDecoupled;
  return Mode::kIdentity;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(
    TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* config;
  RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &config));
  const char* json;
  size_t size;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(config, &json, &size);
  Mode mode = err == nullptr ? ParseMode(std::string(json, size)) : Mode::kIdentity;
  TRITONSERVER_MessageDelete(config);
  RETURN_IF_ERROR(err);
  return TRITONBACKEND_ModelSetState(model, reinterpret_cast<void*>(static_cast<intptr_t>(mode)));
}

__attribute__((visibility("default"))) TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  uint64_t exec_start = NowNs();
  TRITONBACKEND_Model* model;
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  Mode mode = static_cast<Mode>(reinterpret_cast<intptr_t>(state));
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Request* request = requests[r];
    TRITONSERVER_Error* err = nullptr;
    if (mode == Mode::kDecoupled) {
      err = Decoupled(request);
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    } else {
      TRITONBACKEND_Response* response;
      err = TRITONBACKEND_ResponseNew(&response, request);
      if (err == nullptr) {
        if (mode == Mode::kAddSub) {
          err = AddSub(request, response);
        } else if (mode == Mode::kDecode) {
          err = Decode(request, response);
        } else {
          err = Identity(request, response);
        }
        TRITONSERVER_Error* send_err =
            TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
        if (send_err != nullptr) TRITONSERVER_ErrorDelete(send_err);
      }
    }
    uint64_t now = NowNs();
    TRITONSERVER_Error* stat_err = TRITONBACKEND_ModelInstanceReportStatistics(
        instance, request, err == nullptr, exec_start, exec_start, now, now);
    if (stat_err != nullptr) TRITONSERVER_ErrorDelete(stat_err);
    TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  uint64_t exec_end = NowNs();
  TRITONSERVER_Error* stat_err = TRITONBACKEND_ModelInstanceReportBatchStatistics(
      instance, request_count, exec_start, exec_start, exec_end, exec_end);
  if (stat_err != nullptr) TRITONSERVER_ErrorDelete(stat_err);
  return nullptr;
}

}  // extern "C"
