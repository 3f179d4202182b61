// The one owner of every piece of memory a StubSession shares with its stub, and of the rule
// for when each goes back (docs/protocol.md, "Memory lifetimes", draws the states):
//
// - blocks of our arena lent to the stub (EXECUTE inputs, BLS outputs, indirect bodies): pinned
//   while we still read them, freed by the stub's FREE (or a RESULT's freed trailer), a free
//   that comes while pinned completing on unpin; reclaimed here when never handed over;
// - blocks of the stub's arena we hold (outputs, BLS inputs, indirect bodies): queued until we
//   are done, then returned in EXECUTE's trailer, or a FREE on sync (a big RESULT, an idle
//   instance, FINALIZE) or on async (the monitor, a released BLS request);
// - device memory we lent or shared (DeviceHolds: released once, on the stub's FREE naming
//   (GPU_HOLD_SEG, hold), or when never handed, or at teardown);
// - the stub's device allocations we mapped (IpcCache: closed when the stub is gone).
//
// Callers (executor, monitor, response writer, instance, BLS) use this small API and never
// reach into the arena, the queue or the holds themselves. No call here takes a lock or
// allocates beyond what the structure it forwards to did before (the hot path is unchanged).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device_holds.h"
#include "cuda/ipc_cache.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "ipc/codec.h"
#include "ipc/messages/free.h"

namespace pybackend {

// What one EXECUTE lends the stub, filled while the batch is encoded.
struct Loan {
  std::vector<ipc::Arena::Block> blocks;  // our arena
  std::vector<uint64_t> gpu_holds;        // device memory allocated for the stub
};

class MemoryLedger {
 public:
  // `warn` logs what the stub got wrong (an unknown block freed); never called under a lock.
  using Warn = std::function<void(const std::string&)>;
  // References of a RESULT that make the stub's blocks go back right after the responses.
  static constexpr uint64_t kEagerReturnBytes = 1 << 20;

  MemoryLedger(std::string arena_name, uint64_t default_size, uint64_t growth_size, Warn warn);
  ~MemoryLedger() { Teardown(); }
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  // The pieces the channels need for indirect bodies (they allocate from our arena, map the
  // stub's segments and queue the blocks they read): no lifetime decision is made there.
  ipc::Arena& arena() { return arena_; }
  ipc::PeerSegments& peers() { return peers_; }
  ipc::PendingFrees* returns() { return &returns_; }

  // ---------------------------------------------------------- our arena, lent to the stub
  // A block for the stub (throws ipc::ArenaError when none fits). Over shm-max-byte-size it
  // waits (bounded) for blocks the stub holds to come back, unless `held` (blocks the caller
  // was lent and has not handed over yet, such as its batch's earlier inputs) is all there
  // is (ipc::Arena::AllocateOrWait).
  ipc::Arena::Block Lend(uint64_t size, const std::vector<ipc::Arena::Block>& held = {}) {
    return arena_.AllocateOrWait(size, held);
  }
  // Called on a session's monitor thread: Lend never waits there, whichever the session (it
  // handles the FREEs that make room in its own; a wait for another's stalls them).
  static void OnMonitorThread() { ipc::Arena::NeverWaitOnThisThread(); }
  // The first segment, reserved when the instance has loaded (shm-default-byte-size, the
  // instance's whole reservation at load, as the original's one region). Throws
  // ipc::ArenaError.
  void Reserve() { arena_.Reserve(); }
  // A lent block never handed over (the message naming it did not go out).
  void Reclaim(uint32_t seg, uint64_t offset) { arena_.Free(seg, offset); }
  // A batch that never went out: its blocks and device memory come back at once.
  void Reclaim(Loan& loan);
  // While a batch runs: the stub may free its inputs as soon as its arrays die, yet we still
  // read outputs that are views of them; a free that comes meanwhile completes on Unpin.
  void Pin(const Loan& loan);
  void Unpin(const Loan& loan);
  // The stub is done with these blocks of ours: a FREE's list or a RESULT's freed trailer.
  // (GPU_HOLD_SEG, hold) releases device memory. Unknown entries are warned about, never
  // fatal. Returns how many were unknown.
  uint32_t OnStubFree(const ipc::BlockRefs& blocks);
  // Where our block lies in this process (nullptr when out of range).
  const uint8_t* ResolveLent(uint32_t seg, uint64_t offset, uint64_t length) {
    return arena_.Resolve(seg, offset, length);
  }
  // Growth segments empty for a while, unmapped now: the stub needs SEGMENT_DROP for each.
  std::vector<uint32_t> ReleaseIdleSegments() { return arena_.ReleaseIdle(); }

  // ----------------------------------------------------- the stub's blocks, held by us
  // The stub's segment mapping holding [offset, offset+length) (waits, bounded, for its
  // SEGMENT_ADD); nullptr + *error when there is none.
  std::shared_ptr<ipc::Mapping> MapStub(uint32_t seg, uint64_t offset, uint64_t length,
                                        std::string* error) {
    return peers_.Get(seg, offset, length, error);
  }
  // We are done with one of the stub's blocks (or, GPU_HOLD_SEG, a GPU tensor of its): it is
  // queued until the next return.
  void Done(uint32_t seg, uint64_t offset) { returns_.Add(seg, offset); }
  // We are done with every stub block and GPU tensor `body`'s outputs name (after copying).
  void DoneWith(const ipc::ResponseBody& body);

  // ------------------------------------------------- "what is returned now" (the policy)
  // Everything queued, taken to ride in EXECUTE's freed trailer: no message of its own.
  ipc::BlockList TakeReturns() { return returns_.Take(); }
  // Sends everything queued as one FREE on `channel` (nothing to send: no message, unless
  // `even_empty`: an empty FREE still makes the stub drop what it keeps alive for a RESULT).
  // On failure the blocks stay queued.
  bool SendReturns(ipc::Channel& channel, int timeout_ms, std::string* error,
                   bool even_empty = false);
  // After a batch's responses went out; `referenced`: bytes of shared memory its RESULT's
  // outputs name, which the stub keeps alive until its next sync message. True: return now
  // (SendReturns on sync, even empty). False: the next EXECUTE does, or the monitor once the
  // instance has been idle (KeepaliveDue).
  bool ReturnAfterBatch(uint64_t referenced);
  // The monitor: true once a RESULT's references have waited `idle` with no batch since.
  bool KeepaliveDue(std::chrono::milliseconds idle) const;
  // Clears the keepalive; false when none was pending (another thread took it).
  bool TakeKeepalive() { return keepalive_.exchange(false, std::memory_order_relaxed); }
  // Something for the monitor to do soon (returns queued, segments to release, a keepalive).
  bool HasWork() {
    return !returns_.empty() || arena_.HasIdleCandidates() ||
           keepalive_.load(std::memory_order_relaxed);
  }

  // --------------------------------------------------------------- device memory (GPU)
  // Describes Triton's device memory at `ptr` for the stub, without a hold; false when CUDA
  // IPC cannot share it (then LendDevice a copy).
  bool ShareDevice(int device, const void* ptr, const std::string& where, ipc::GpuRef* ref) {
    return holds_.Share(device, ptr, where, ref);
  }
  // Device memory lent to the stub under a fresh hold (ref->hold). Throws BackendError.
  cuda::CUdeviceptr LendDevice(int device, size_t size, const std::string& where,
                               ipc::GpuRef* ref) {
    return holds_.Allocate(device, size, where, ref);
  }
  // The lending pool (DeviceHolds, PYBACKEND_GPU_LEND_POOL): tests switch it; its idle buffers.
  void set_lend_pool(bool on) { holds_.set_pool(on); }
  size_t pooled_device() { return holds_.pooled(); }
  // Frees lent device memory never handed over (or handed and freed): once; false when the
  // hold is unknown (already released).
  bool ReleaseHold(uint64_t hold) { return holds_.Release(hold); }
  // Our device allocation a GPU_IPC tensor of owner BACKEND names; false when unknown.
  bool FindLentDevice(const ipc::GpuRef& ref, cuda::IpcCache::Mapping* out) {
    return holds_.Find(ref, out);
  }
  // Runs fn with the stub's device allocation `ref` names mapped here (opened once, cached).
  void WithStubDevice(const ipc::GpuRef& ref, const std::string& where,
                      const std::function<void(const cuda::IpcCache::Mapping&)>& fn) {
    ipc_cache_.With(ref, where, fn);
  }
  // The gauge of open IPC mappings.
  void set_on_ipc_count(std::function<void(size_t)> fn) { ipc_cache_.set_on_count(std::move(fn)); }

  // ----------------------------------------------------------------------- teardown
  // The stub is dead (MarkDead): a lookup of a segment it never announced fails at once.
  void OnStubDead() { peers_.Abort(); }
  // Its last messages are handled (the monitor, after draining async): its device
  // allocations are unmapped now, not when the session is destroyed after a restart, so the
  // driver can free them (docs/gpu.md).
  void OnStubGone() { ipc_cache_.CloseAll(); }
  // The session ends: everything the stub held of ours and we held of its goes (returns
  // queued are dropped: nobody is left to take them). Idempotent.
  void Teardown();

  // For tests and the monitor's busy check.
  size_t queued_returns() { return returns_.size(); }
  size_t device_holds() { return holds_.size(); }
  size_t ipc_mappings() { return ipc_cache_.open_count(); }

 private:
  Warn warn_;
  ipc::Arena arena_;
  ipc::PeerSegments peers_;
  ipc::PendingFrees returns_;
  cuda::IpcCache ipc_cache_;
  cuda::DeviceHolds holds_;
  std::atomic<bool> keepalive_{false};
  std::atomic<int64_t> keepalive_since_ns_{0};
};

}  // namespace pybackend
