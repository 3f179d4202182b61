#include "backend/memory_ledger.h"

#include "ipc/protocol.h"

namespace pybackend {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() { return Clock::now().time_since_epoch().count(); }

}  // namespace

MemoryLedger::MemoryLedger(std::string arena_name, uint64_t default_size, uint64_t growth_size,
                           Warn warn)
    : warn_(std::move(warn)), arena_(std::move(arena_name), default_size, growth_size) {}

void MemoryLedger::Reclaim(Loan& loan) {
  for (const auto& b : loan.blocks) arena_.Free(b.seg, b.offset);
  loan.blocks.clear();
  for (uint64_t hold : loan.gpu_holds) holds_.Release(hold);
  loan.gpu_holds.clear();
}

void MemoryLedger::Pin(const Loan& loan) {
  for (const auto& b : loan.blocks) arena_.Pin(b.seg, b.offset);
}

void MemoryLedger::Unpin(const Loan& loan) {
  for (const auto& b : loan.blocks) arena_.Unpin(b.seg, b.offset);
}

uint32_t MemoryLedger::OnStubFree(const ipc::BlockRefs& blocks) {
  uint32_t unknown = 0;
  for (uint32_t i = 0; i < blocks.size(); ++i) {
    uint32_t seg = blocks.seg(i);
    uint64_t off = blocks.offset(i);
    if (seg == ipc::GPU_HOLD_SEG) {  // device memory we lent (docs/gpu.md)
      if (!holds_.Release(off)) {
        ++unknown;
        if (warn_) warn_("the stub freed an unknown GPU hold " + std::to_string(off));
      }
      continue;
    }
    if (!arena_.Free(seg, off)) {
      ++unknown;
      if (warn_) {
        warn_("the stub freed an unknown block (segment " + std::to_string(seg) + ", offset " +
              std::to_string(off) + ")");
      }
    }
  }
  return unknown;
}

void MemoryLedger::DoneWith(const ipc::ResponseBody& body) {
  for (const ipc::TensorDesc& t : body.outputs) {
    if (t.location == ipc::Location::STUB_ARENA) returns_.Add(t.seg, t.offset);
    // The stub keeps a GPU output's memory alive until it gets this back (whoever's
    // allocation it lies in: a view of a GPU input is memory of ours).
    if (t.location == ipc::Location::GPU_IPC) returns_.Add(ipc::GPU_HOLD_SEG, t.gpu.hold);
  }
}

bool MemoryLedger::SendReturns(ipc::Channel& channel, int timeout_ms, std::string* error,
                               bool even_empty) {
  ipc::BlockList blocks = returns_.Take();
  if (blocks.empty() && !even_empty) return true;
  if (channel.Send(ipc::MessageKind::FREE, 0, ipc::EncodeFree(ipc::Owner::STUB, blocks), timeout_ms,
                   error)) {
    return true;
  }
  // Not sent: the blocks are still the stub's to get back (the next return tries again).
  for (const auto& [seg, off] : blocks) returns_.Add(seg, off);
  return false;
}

bool MemoryLedger::ReturnAfterBatch(uint64_t referenced) {
  // Only big references go back at once: a FREE wakes the stub's main thread, which costs
  // more than a small block kept until the next EXECUTE (whose trailer returns it anyway).
  if (referenced >= kEagerReturnBytes) {
    keepalive_.store(false, std::memory_order_relaxed);
    return true;
  }
  if (referenced > 0) keepalive_since_ns_.store(NowNs(), std::memory_order_relaxed);
  keepalive_.store(referenced > 0, std::memory_order_relaxed);
  return false;
}

bool MemoryLedger::KeepaliveDue(std::chrono::milliseconds idle) const {
  if (!keepalive_.load(std::memory_order_relaxed)) return false;
  auto since = Clock::time_point(Clock::duration(keepalive_since_ns_.load()));
  return Clock::now() - since >= idle;
}

void MemoryLedger::Teardown() {
  OnStubDead();
  OnStubGone();
  holds_.ReleaseAll();
  peers_.Clear();
  returns_.Clear();
  keepalive_.store(false, std::memory_order_relaxed);
}

}  // namespace pybackend
