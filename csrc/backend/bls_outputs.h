// Where the outputs of a BLS call go (spec 4.6, docs/gpu.md): Triton's response allocator
// puts each into a block of the calling session's arena (lent to the stub through its
// MemoryLedger), onto the heap when small (then copied inline into BLS_RESPONSE), or into
// device memory lent to the stub when the caller prefers GPU memory; and the encoding of a
// callee's response into a BLS_RESPONSE body naming them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/stub_session.h"
#include "ipc/codec.h"
#include "ipc/messages/bls.h"
#include "triton/tritonserver_infer.h"

namespace pybackend {

// What the allocator needs of a call (its userp): set before the request is started.
struct BlsOutputTarget {
  std::shared_ptr<StubSession> session;
  std::string callee;             // for messages
  uint64_t inline_threshold = 0;  // outputs up to this size go inline
  // pb_utils.PreferredMemory(TRITONSERVER_MEMORY_GPU, device): outputs go to device memory
  // lent to the stub; otherwise to host memory as always.
  bool prefer_gpu = false;
  int64_t preferred_device = 0;
  // An output of the response being made found no room in the caller's memory (the callee's
  // backend then answers with an error response): the next response to complete is marked
  // undelivered, so the caller sees it instead of taking it for the callee's own error.
  std::atomic<bool> delivery_failed{false};
};

// One output buffer: lent memory (the arena or the GPU) goes to the stub once a response
// naming it is out (`handed`: the stub returns it with FREE); until then it is ours and goes
// back to the ledger when Triton releases the buffer.
struct OutBuf {
  std::shared_ptr<StubSession> session;
  bool arena = false;
  bool gpu = false;  // device memory lent to the stub under gpu_ref.hold
  ipc::GpuRef gpu_ref;
  bool handed = false;
  uint32_t seg = 0;
  uint64_t offset = 0;
  void* heap = nullptr;
};

// One allocator for the process; its userp is the call's BlsOutputTarget.
TRITONSERVER_ResponseAllocator* BlsAllocator();

// Writes `resp` as the BLS_RESPONSE's response; returns the lent buffers it names (to mark
// handed once the message is out).
std::vector<OutBuf*> WriteBlsResponse(ipc::BlsResponseEncoder& enc,
                                      TRITONSERVER_InferenceResponse* resp);

}  // namespace pybackend
