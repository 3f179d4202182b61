#include "ipc/channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "ipc/codec.h"
#include "ipc/lane.h"
#include "ipc/messages/free.h"
#include "ipc/messages/session.h"

namespace pybackend::ipc {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

// ------------------------------------------------------------------------ PendingFrees

void PendingFrees::Add(uint32_t seg, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.emplace_back(seg, offset);
}

BlockList PendingFrees::Take() {
  BlockList blocks;
  std::lock_guard<std::mutex> lock(mu_);
  blocks.swap(blocks_);
  return blocks;
}

std::vector<uint8_t> PendingFrees::TakeBody(Owner owner) {
  BlockList blocks = Take();
  if (blocks.empty()) return {};
  return EncodeFree(owner, blocks);
}

void PendingFrees::TakeTrailer(Writer& w) { AppendFreed(w, Take()); }

bool PendingFrees::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.empty();
}

size_t PendingFrees::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.size();
}

void PendingFrees::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.clear();
}

// ----------------------------------------------------------------------------- Channel

Channel::Channel(int fd, std::string name, Arena* own, PeerSegments* peer, PendingFrees* frees)
    : fd_(fd), name_(std::move(name)), own_(own), peer_(peer), frees_(frees) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  rbuf_.resize(MAX_DATAGRAM);
}

void Channel::Shutdown() {
  if (fd_) shutdown(fd_.get(), SHUT_RDWR);
}

bool Channel::SendRaw(uint16_t kind, uint16_t flags, uint64_t id, const uint8_t* body, size_t len,
                      int pass_fd, int timeout_ms, std::string* error) {
  Header h{kind, flags, static_cast<uint32_t>(len), id};
  iovec iov[2];
  iov[0].iov_base = &h;
  iov[0].iov_len = sizeof(h);
  iov[1].iov_base = const_cast<uint8_t*>(body);
  iov[1].iov_len = len;
  msghdr mh{};
  mh.msg_iov = iov;
  mh.msg_iovlen = len > 0 ? 2 : 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    std::memset(cbuf, 0, sizeof(cbuf));
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    ssize_t n = sendmsg(fd_.get(), &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      Lane* lane = lane_.load(std::memory_order_acquire);
      if (lane != nullptr) lane->SocketSent();  // the peer sleeps on the lane's bell
      return true;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *error = "sending " + std::string(KindName(kind)) + " on the " + name_ +
               " channel failed: " + std::strerror(errno);
      return false;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      *error = "the stub did not read the " + name_ + " channel for " + std::to_string(timeout_ms) +
               " ms (sending " + KindName(kind) + ")";
      return false;
    }
    pollfd p{fd_.get(), POLLOUT, 0};
    poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
  }
}

bool Channel::AnnounceLocked(int timeout_ms, std::string* error) {
  if (own_ == nullptr) return true;
  bool ok = true;
  for (const NewSegment& s : own_->TakeUnannounced()) {
    if (ok) {
      std::vector<uint8_t> body = EncodeSegmentAdd({Owner::BACKEND, s.id, s.size});
      ok = SendRaw(static_cast<uint16_t>(MessageKind::SEGMENT_ADD), 0, 0, body.data(), body.size(),
                   s.fd, timeout_ms, error);
    }
    close(s.fd);
  }
  return ok;
}

bool Channel::AnnounceSegments(int timeout_ms, std::string* error) {
  std::lock_guard<std::mutex> lock(send_mu_);
  return AnnounceLocked(timeout_ms, error);
}

bool Channel::Send(MessageKind kind, uint64_t id, const uint8_t* body, size_t len, int timeout_ms,
                   std::string* error, int pass_fd) {
  std::lock_guard<std::mutex> lock(send_mu_);
  if (len > MAX_INLINE_BODY) {
    if (own_ == nullptr) {
      *error = "message body of " + std::to_string(len) + " bytes is too large for the " + name_ +
               " channel";
      return false;
    }
    Arena::Block b;
    try {
      b = own_->Allocate(len);
    } catch (const ArenaError& e) {
      *error = e.what();
      return false;
    }
    std::memcpy(b.ptr, body, len);
    if (!AnnounceLocked(timeout_ms, error)) return false;
    std::vector<uint8_t> ref = EncodeIndirect({b.seg, b.offset, len});
    return SendRaw(static_cast<uint16_t>(kind), FLAG_INDIRECT, id, ref.data(), ref.size(), pass_fd,
                   timeout_ms, error);
  }
  if (!AnnounceLocked(timeout_ms, error)) return false;
  return SendRaw(static_cast<uint16_t>(kind), 0, id, body, len, pass_fd, timeout_ms, error);
}

Channel::RecvStatus Channel::Recv(Message* msg, std::string* error) {
  iovec iov{rbuf_.data(), rbuf_.size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  ssize_t n;
  do {
    n = recvmsg(fd_.get(), &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return RecvStatus::kWouldBlock;
    if (errno == ECONNRESET) return RecvStatus::kClosed;
    *error = "receiving on the " + name_ + " channel failed: " + std::strerror(errno);
    return RecvStatus::kError;
  }
  // Collect every fd first so none leaks whatever happens next.
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(f);
    }
  }
  if (n == 0) return RecvStatus::kClosed;
  if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    *error = "the stub sent a datagram larger than " + std::to_string(MAX_DATAGRAM) +
             " bytes (or too many fds) on the " + name_ + " channel";
    return RecvStatus::kError;
  }
  if (static_cast<size_t>(n) < HEADER_SIZE) {
    *error = "short datagram (" + std::to_string(n) + " bytes) on the " + name_ + " channel";
    return RecvStatus::kError;
  }
  Header h;
  std::memcpy(&h, rbuf_.data(), sizeof(h));
  if (h.body_len != static_cast<size_t>(n) - HEADER_SIZE) {
    *error = "datagram of kind " + std::to_string(h.kind) + " says body_len " +
             std::to_string(h.body_len) + " but carries " + std::to_string(n - HEADER_SIZE) +
             " bytes";
    return RecvStatus::kError;
  }
  msg->kind = h.kind;
  msg->flags = h.flags;
  msg->id = h.id;
  msg->fd.Reset(fds.empty() ? -1 : fds[0].Release());
  const uint8_t* body = rbuf_.data() + HEADER_SIZE;
  if (!(h.flags & FLAG_INDIRECT)) {
    msg->body.assign(body, body + h.body_len);
    return RecvStatus::kOk;
  }
  try {
    IndirectRef ref = DecodeIndirect(body, h.body_len);
    uint32_t seg = ref.seg;
    uint64_t off = ref.offset;
    uint64_t len = ref.length;
    if (peer_ == nullptr) throw DecodeError("indirect body where none is allowed");
    auto map = peer_->Get(seg, off, len, error);
    if (!map) return RecvStatus::kError;
    msg->body.assign(map->base + off, map->base + off + len);
    if (frees_ != nullptr) frees_->Add(seg, off);
  } catch (const DecodeError& e) {
    *error = std::string("bad indirect body: ") + e.what();
    return RecvStatus::kError;
  }
  return RecvStatus::kOk;
}

}  // namespace pybackend::ipc
