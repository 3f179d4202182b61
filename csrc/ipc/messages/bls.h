// BLS and model control (docs/protocol.md, "BLS and model control"): BLS_EXEC,
// BLS_RESPONSE, MODEL_LOAD, MODEL_UNLOAD, MODEL_READY (BLS_CANCEL has no body).
// Python: pybackend/ipc/bls_codec.py.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/codec.h"
#include "ipc/messages/body_encoder.h"
#include "ipc/messages/execute.h"
#include "ipc/protocol.h"

namespace pybackend::ipc {

// One BLS request as the stub sends it. Views and INLINE inputs point into the body decoded.
struct BlsExecMsg {
  std::string model_name;
  int64_t model_version = -1;
  bool decoupled = false;
  std::string request_id;
  CorrelationId correlation_id;
  uint32_t flags = 0;
  uint64_t timeout_us = 0;
  uint8_t preferred_memory = 2;  // pb_utils numbering: 0 GPU, 1 CPU, 2 default
  int64_t preferred_device = 0;
  std::string_view parameters;  // "" or a JSON object
  std::vector<std::string> requested_outputs;
  std::vector<TensorDesc> inputs;
  uint64_t parent_token = 0;  // the request whose execute made the call (0: none)
};
// Fills `out` field by field: on DecodeError what was read before stays (the callee's name
// for the error message). Trailing bytes are an error too.
void DecodeBlsExec(const std::vector<uint8_t>& body, BlsExecMsg* out);

// BLS_RESPONSE: `u32 response_flags, u8 has_response, [ResponseBody]`. Construct with the
// flags, then NoResponse, ErrorResponse, or BeginResponse + its output tensors (BodyEncoder)
// + EndResponse with their count.
// A BLS_RESPONSE flag of ours beside Triton's FINAL: the response is an error because its
// outputs found no room in the caller's shared memory, not one the callee sent. The stub
// gives it to the model even mid-stream, where the callee's own errors are dropped.
constexpr uint32_t kBlsResponseUndelivered = 1u << 31;

class BlsResponseEncoder : public BodyEncoder {
 public:
  explicit BlsResponseEncoder(uint32_t response_flags) { w_.U32(response_flags); }
  void NoResponse() { w_.U8(0); }
  void ErrorResponse(uint32_t code, std::string_view message);
  void BeginResponse(std::string_view parameters);
  void EndResponse(uint32_t n_outputs) { w_.PatchU32(count_at_, n_outputs); }

 private:
  size_t count_at_ = 0;
};

struct ModelLoadMsg {
  struct File {
    std::string path;               // "file:<path>"
    const uint8_t* data = nullptr;  // into the body decoded
    uint32_t size = 0;
  };
  std::string model_name;
  std::string config;  // JSON or ""
  std::vector<File> files;
};
ModelLoadMsg DecodeModelLoad(const std::vector<uint8_t>& body);

struct ModelUnloadMsg {
  std::string model_name;
  bool unload_dependents = false;
};
ModelUnloadMsg DecodeModelUnload(const std::vector<uint8_t>& body);

struct ModelReadyMsg {
  std::string model_name;
  int64_t version = -1;  // -1: the latest
};
ModelReadyMsg DecodeModelReady(const std::vector<uint8_t>& body);

}  // namespace pybackend::ipc
