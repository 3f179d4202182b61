// Writes one Triton request into an EXECUTE body (docs/protocol.md, ExecuteBody): ids,
// flags, timeout, parameters, requested outputs, and every input gathered from all its
// buffers with one copy, either inline in the message or into one block of our arena.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/request_registry.h"
#include "backend/stub_session.h"
#include "ipc/arena.h"
#include "ipc/codec.h"

namespace pybackend {

struct EncodeContext {
  ipc::Arena* arena = nullptr;
  uint64_t inline_threshold = 4096;
  std::string instance_name;
  // Arena blocks handed to the stub by this batch; freed here if the batch never goes out.
  std::vector<ipc::Arena::Block> blocks;
  // GPU inputs (docs/gpu.md): the session (its device holds, copy counters) and the model's
  // FORCE_CPU_ONLY_INPUT_TENSORS. Without a session every input goes to host memory.
  StubSession* session = nullptr;
  bool force_cpu_inputs = true;
  // Device memory lent to the stub by this batch; released here if the batch never goes out.
  std::vector<uint64_t> gpu_holds;
};

// Throws BackendError (the batch fails) on any Triton error, a GPU input, or malformed
// BYTES input. Fills st.requested_outputs.
void EncodeRequest(ipc::Writer& w, RequestState& st, EncodeContext& ctx);

// Checks serialized BYTES data: `expected` elements of u32 length + bytes, nothing left over.
void ValidateBytesInput(const uint8_t* data, uint64_t size, uint64_t expected,
                        const std::string& name);

}  // namespace pybackend
