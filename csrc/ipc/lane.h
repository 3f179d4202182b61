// The sync channel's fast lane: one shared page beside the sync socket with a message slot,
// a doorbell (futex) and a count of socket messages per direction.
//
// Why: a cross-process round trip between two CPUs costs ~40-50 us through a socket on the
// VMs we measure on and ~23-29 us with the data in shared memory and a futex wake-up, with
// a C or a Python peer (benchmarks/pingpong). EXECUTE and RESULT travel in the slots;
// everything else (fds, big bodies, control messages) stays on the socket. Every send rings
// the receiver's bell (a socket send right before a slot post may leave that to the post), and a
// socket send first bumps the direction's socket count, so the receiver sleeps on the futex alone
// and only reads the socket when a message waits there (it reads those first: a SEGMENT_ADD sent
// before an EXECUTE is handled before it).
//
// Layout of each 64 KiB block ("down" = backend -> stub at 0, "up" = stub -> backend at
// 64 KiB): u32 bell @0, u32 full @4, u32 kind @8, u32 socket count @12, u64 id @16,
// u32 len @24, body @64. x86-64 only: the stub writes with plain stores.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ipc/channel.h"

namespace pybackend::ipc {

constexpr size_t kLaneBlockBytes = 64 * 1024;
constexpr size_t kLaneHeadBytes = 64;
constexpr size_t kLaneSlotBytes = kLaneBlockBytes - kLaneHeadBytes;

// The backend's side.
class Lane {
 public:
  static bool Supported();

  // Creates and maps the page; throws ArenaError when it cannot.
  explicit Lane(const std::string& name);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  int fd() const { return fd_; }

  // EXECUTE into the down slot, then ring. False when it does not fit or the stub has not
  // taken the previous one (send it on the socket then).
  bool Post(MessageKind kind, uint64_t id, const uint8_t* body, size_t len);
  // After a message went out on the socket: count it and ring.
  void SocketSent();

  // The up bell now; pass it to Wait after finding nothing.
  uint32_t UpBell() const;
  // True when the stub sent socket messages we have not read: read one, then call
  // SocketRead().
  bool SocketPending() const;
  void SocketRead() { ++socket_read_; }
  // Moves a message from the up slot into *out; false when empty.
  bool Take(Message* out);
  // Polls the up bell until it differs from `seen` (true) or `limit` passes (false), a pause
  // instruction between reads: for a reply expected sooner than a sleeping thread wakes up
  // (backend/lane_spin.h decides whether to).
  bool Spin(uint32_t seen, std::chrono::microseconds limit) const;
  // Sleeps until the up bell differs from `seen` or `timeout` passes.
  void Wait(uint32_t seen, std::chrono::milliseconds timeout);
  // Rings the up bell from our side: wakes our own waiter (the stub is gone).
  void WakeWaiter();
  // Wakes our own waiter if it sleeps in Wait, without touching the up bell: the stub bumps
  // that word with plain stores, so a ring of ours while it lives could be lost in its
  // increment and with it the stub's own ring. Wait then returns with the bell unchanged;
  // a nudge that comes before the waiter sleeps is lost (the waiter sleeps as before).
  void Nudge();

 private:
  uint8_t* block(bool up) const { return base_ + (up ? kLaneBlockBytes : 0); }

  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint32_t socket_read_ = 0;  // the stub's socket messages we have read (one reader thread)
};

}  // namespace pybackend::ipc
