// Writes one Triton request into an EXECUTE body (docs/protocol.md, ExecuteBody): ids,
// flags, timeout, parameters, requested outputs, and every input gathered from all its
// buffers with one copy, either inline in the message or into one block of our arena.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/memory_ledger.h"
#include "backend/request_registry.h"
#include "backend/stub_session.h"
#include "ipc/codec.h"
#include "ipc/messages/execute.h"

namespace pybackend {

struct EncodeContext {
  MemoryLedger* ledger = nullptr;  // lends the arena blocks and device memory inputs go to
  uint64_t inline_threshold = 4096;
  std::string instance_name;
  // What this batch lends the stub (arena blocks, device memory): the ledger reclaims it if
  // the batch never goes out, and pins it while the batch runs.
  Loan loan;
  // GPU inputs (docs/gpu.md): the session (copy counters) and the model's
  // FORCE_CPU_ONLY_INPUT_TENSORS. Without a session every input goes to host memory.
  StubSession* session = nullptr;
  bool force_cpu_inputs = true;
};

// Throws BackendError (the batch fails) on any Triton error, a GPU input, or malformed
// BYTES input. Fills st.requested_outputs.
void EncodeRequest(ipc::ExecuteEncoder& enc, RequestState& st, EncodeContext& ctx);

// Checks serialized BYTES data: `expected` elements of u32 length + bytes, nothing left over.
void ValidateBytesInput(const uint8_t* data, uint64_t size, uint64_t expected,
                        const std::string& name);

}  // namespace pybackend
