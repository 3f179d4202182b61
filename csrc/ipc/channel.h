// One end of a SOCK_SEQPACKET socketpair: one datagram per message, fds passed with
// SCM_RIGHTS, and the FLAG_INDIRECT rule for bodies larger than MAX_INLINE_BODY (the body
// goes into the sender's arena and the datagram only names the block).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ipc/arena.h"
#include "ipc/codec.h"
#include "ipc/messages/free.h"
#include "ipc/protocol.h"

namespace pybackend::ipc {

class Lane;

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(o.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1);
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Message {
  uint16_t kind = 0;
  uint16_t flags = 0;
  uint64_t id = 0;
  std::vector<uint8_t> body;  // the real body (indirect bodies already fetched)
  UniqueFd fd;                // the fd attached to the datagram, if any
};

// Blocks of the peer's arena we have finished reading and must hand back with FREE.
class PendingFrees {
 public:
  void Add(uint32_t seg, uint64_t offset);
  // Everything queued so far, handed to the caller (the queue is empty afterwards).
  BlockList Take();
  // Everything queued so far, encoded as a FREE body for owner `owner`; empty if none.
  std::vector<uint8_t> TakeBody(Owner owner);
  // Everything queued so far, appended to `w` as a freed trailer (u32 count, then the
  // (u32 segment, u64 offset) pairs) that ends an EXECUTE body; nothing if none.
  void TakeTrailer(Writer& w);
  bool empty();
  size_t size();
  void Clear();  // the peer is gone: nobody is left to take them

 private:
  std::mutex mu_;
  BlockList blocks_;
};

class Channel {
 public:
  enum class RecvStatus { kOk, kWouldBlock, kClosed, kError };

  // Takes ownership of `fd` and makes it non-blocking. `own` allocates indirect bodies we
  // send and announces its new segments first; `peer` resolves indirect bodies we receive,
  // whose blocks are then queued on `frees`. Any of them may be null (no indirect bodies).
  Channel(int fd, std::string name, Arena* own, PeerSegments* peer, PendingFrees* frees);
  ~Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Sends one message, waiting at most timeout_ms for socket buffer space. `pass_fd` >= 0 is
  // attached with SCM_RIGHTS (still owned by the caller). False + *error on failure.
  bool Send(MessageKind kind, uint64_t id, const uint8_t* body, size_t len, int timeout_ms,
            std::string* error, int pass_fd = -1);
  bool Send(MessageKind kind, uint64_t id, const std::vector<uint8_t>& body, int timeout_ms,
            std::string* error) {
    return Send(kind, id, body.data(), body.size(), timeout_ms, error);
  }
  // Sends SEGMENT_ADD for every segment of `own` the peer has not heard of yet.
  bool AnnounceSegments(int timeout_ms, std::string* error);

  // Non-blocking receive of one message.
  RecvStatus Recv(Message* msg, std::string* error);

  int fd() const { return fd_.get(); }
  // From now on every message sent is counted on `lane` and rings its bell.
  void AttachLane(Lane* lane) { lane_.store(lane, std::memory_order_release); }
  const std::string& name() const { return name_; }
  // Stops both directions so a peer blocked on us sees EOF; the fd stays open until
  // destruction so no other thread polls a reused number.
  void Shutdown();

 private:
  bool SendRaw(uint16_t kind, uint16_t flags, uint64_t id, const uint8_t* body, size_t len,
               int pass_fd, int timeout_ms, std::string* error);
  bool AnnounceLocked(int timeout_ms, std::string* error);

  UniqueFd fd_;
  std::string name_;
  Arena* own_;
  PeerSegments* peer_;
  PendingFrees* frees_;
  std::mutex send_mu_;
  std::atomic<Lane*> lane_{nullptr};
  std::vector<uint8_t> rbuf_;
};

}  // namespace pybackend::ipc
