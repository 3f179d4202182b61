// The builder EXECUTE and BLS_RESPONSE bodies are written with (messages/execute.h,
// messages/bls.h): those bodies grow while Triton's requests or responses are read, and a
// tensor's bytes are copied straight from Triton's buffer into the body (no staging copy).
// The layout of a tensor is TensorDesc's (docs/protocol.md; ipc/codec.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ipc/codec.h"
#include "ipc/protocol.h"

namespace pybackend::ipc {

// Everything of a TensorDesc before its data or its place.
struct TensorHead {
  std::string_view name;
  uint8_t dtype = 0;  // TRITONSERVER_DataType
  const int64_t* dims = nullptr;
  uint32_t ndim = 0;
  uint64_t byte_size = 0;
};

class BodyEncoder {
 public:
  size_t size() const { return w_.size(); }
  const uint8_t* data() const { return w_.data(); }
  std::vector<uint8_t> Take() { return w_.Take(); }

  // A tensor whose bytes travel in the body: returns where its byte_size bytes go (fill them
  // before anything else is written).
  uint8_t* InlineTensor(const TensorHead& t) {
    WriteTensorHead(w_, t.name, t.dtype, Location::INLINE, t.dims, t.ndim, t.byte_size);
    return w_.Extend(t.byte_size);
  }
  // A tensor in an arena block (`where`: BACKEND_ARENA or STUB_ARENA).
  void ArenaTensor(const TensorHead& t, Location where, uint32_t seg, uint64_t offset) {
    WriteTensorHead(w_, t.name, t.dtype, where, t.dims, t.ndim, t.byte_size);
    w_.U32(seg);
    w_.U64(offset);
  }
  void GpuTensor(const TensorHead& t, const GpuRef& ref) {
    WriteTensorHead(w_, t.name, t.dtype, Location::GPU_IPC, t.dims, t.ndim, t.byte_size);
    WriteGpuRef(w_, ref);
  }

 protected:
  Writer w_;
};

}  // namespace pybackend::ipc
