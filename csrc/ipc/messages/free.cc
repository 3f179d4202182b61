#include "ipc/messages/free.h"

#include <string>

namespace pybackend::ipc {

std::vector<uint8_t> EncodeFree(Owner owner, const BlockList& blocks) {
  Writer w;
  w.U8(static_cast<uint8_t>(owner));
  w.U32(static_cast<uint32_t>(blocks.size()));
  for (const auto& [seg, off] : blocks) {
    w.U32(seg);
    w.U64(off);
  }
  return w.Take();
}

FreeMsg DecodeFree(const std::vector<uint8_t>& body) {
  Reader r(body.data(), body.size());
  FreeMsg m;
  m.owner = static_cast<Owner>(r.U8());
  uint32_t n = r.U32();
  m.blocks = BlockRefs(r.Bytes(static_cast<uint64_t>(n) * BlockRefs::kBytes), n);
  return m;
}

void AppendFreed(Writer& w, const BlockList& blocks) {
  if (blocks.empty()) return;
  w.U32(static_cast<uint32_t>(blocks.size()));
  for (const auto& [seg, off] : blocks) {
    w.U32(seg);
    w.U64(off);
  }
}

BlockRefs ReadFreed(Reader& r, const char* what) {
  if (r.remaining() == 0) return {};
  uint32_t n = r.U32();
  if (r.remaining() != static_cast<size_t>(n) * BlockRefs::kBytes) {
    throw DecodeError(std::string(what) + "'s freed trailer announces " + std::to_string(n) +
                      " blocks but carries " + std::to_string(r.remaining()) + " bytes");
  }
  return BlockRefs(r.Bytes(r.remaining()), n);
}

}  // namespace pybackend::ipc
