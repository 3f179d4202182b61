// FREE (docs/protocol.md, "Message kinds") and the freed trailer an ExecuteBody or an OK
// ResultBody may end with: blocks handed back to their owner. Python: pybackend/ipc/free_codec.py.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "ipc/codec.h"
#include "ipc/protocol.h"

namespace pybackend::ipc {

// (segment, offset) of a block; (GPU_HOLD_SEG, hold) names a GPU hold.
using BlockList = std::vector<std::pair<uint32_t, uint64_t>>;

// BlockRefs as they lie in a received body, read in place (no copy, no allocation): the
// body must outlive the view.
class BlockRefs {
 public:
  static constexpr size_t kBytes = sizeof(uint32_t) + sizeof(uint64_t);  // u32 seg, u64 offset

  BlockRefs() = default;
  BlockRefs(const uint8_t* at, uint32_t n) : at_(at), n_(n) {}
  uint32_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  uint32_t seg(uint32_t i) const { return Get<uint32_t>(i, 0); }
  uint64_t offset(uint32_t i) const { return Get<uint64_t>(i, sizeof(uint32_t)); }

 private:
  template <typename T>
  T Get(uint32_t i, size_t at) const {
    T v;
    std::memcpy(&v, at_ + i * kBytes + at, sizeof(T));
    return v;
  }
  const uint8_t* at_ = nullptr;
  uint32_t n_ = 0;
};

struct FreeMsg {
  Owner owner = Owner::STUB;  // whose arena the blocks belong to
  BlockRefs blocks;           // points into the body decoded
};

std::vector<uint8_t> EncodeFree(Owner owner, const BlockList& blocks);
// Throws DecodeError when the body is shorter than its count says.
FreeMsg DecodeFree(const std::vector<uint8_t>& body);

// The freed trailer (u32 count, then the BlockRefs), appended to a body; nothing when empty.
void AppendFreed(Writer& w, const BlockList& blocks);
// The freed trailer that ends a body (the reader is at it): exactly its count of BlockRefs
// must follow, else DecodeError. Returns an empty list when nothing is left to read.
BlockRefs ReadFreed(Reader& r, const char* what);

}  // namespace pybackend::ipc
