#include "ipc/lane.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ipc/arena.h"

namespace pybackend::ipc {
namespace {

constexpr size_t kBell = 0, kFull = 4, kKind = 8, kSocketCount = 12, kId = 16, kLen = 24;

uint32_t* Word(uint8_t* block, size_t offset) {
  return reinterpret_cast<uint32_t*>(block + offset);
}

void Ring(uint32_t* bell) {
  __atomic_fetch_add(bell, 1u, __ATOMIC_RELEASE);
  syscall(SYS_futex, bell, FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

}  // namespace

bool Lane::Supported() {
#if defined(__x86_64__)
  return true;
#else
  return false;
#endif
}

Lane::Lane(const std::string& name) {
  fd_ = CreateSegmentFd(name, 2 * kLaneBlockBytes);
  void* p = mmap(nullptr, 2 * kLaneBlockBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd_);
    throw ArenaError("cannot map the sync lane: " + std::string(std::strerror(err)));
  }
  base_ = static_cast<uint8_t*>(p);
}

Lane::~Lane() {
  if (base_ != nullptr) munmap(base_, 2 * kLaneBlockBytes);
  if (fd_ >= 0) close(fd_);
}

bool Lane::Post(MessageKind kind, uint64_t id, const uint8_t* body, size_t len) {
  uint8_t* b = block(false);
  if (len > kLaneSlotBytes || __atomic_load_n(Word(b, kFull), __ATOMIC_ACQUIRE) != 0) {
    return false;
  }
  if (len > 0) std::memcpy(b + kLaneHeadBytes, body, len);
  *Word(b, kKind) = static_cast<uint32_t>(kind);
  std::memcpy(b + kId, &id, sizeof id);
  *Word(b, kLen) = static_cast<uint32_t>(len);
  __atomic_store_n(Word(b, kFull), 1u, __ATOMIC_RELEASE);
  Ring(Word(b, kBell));
  return true;
}

void Lane::SocketSent() {
  uint8_t* b = block(false);
  __atomic_fetch_add(Word(b, kSocketCount), 1u, __ATOMIC_RELEASE);
  Ring(Word(b, kBell));
}

uint32_t Lane::UpBell() const {
  return __atomic_load_n(Word(block(true), kBell), __ATOMIC_ACQUIRE);
}

bool Lane::SocketPending() const {
  return __atomic_load_n(Word(block(true), kSocketCount), __ATOMIC_ACQUIRE) != socket_read_;
}

bool Lane::Take(Message* out) {
  uint8_t* b = block(true);
  if (__atomic_load_n(Word(b, kFull), __ATOMIC_ACQUIRE) == 0) return false;
  uint32_t len = *Word(b, kLen);
  if (len > kLaneSlotBytes) len = kLaneSlotBytes;  // a broken stub must not make us overread
  out->kind = static_cast<uint16_t>(*Word(b, kKind));
  out->flags = 0;
  std::memcpy(&out->id, b + kId, sizeof out->id);
  out->body.assign(b + kLaneHeadBytes, b + kLaneHeadBytes + len);
  out->fd.Reset();
  __atomic_store_n(Word(b, kFull), 0u, __ATOMIC_RELEASE);
  return true;
}

bool Lane::Spin(uint32_t seen, std::chrono::microseconds limit) const {
  const uint32_t* bell = Word(block(true), kBell);
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    // The clock every 8 polls: a pause lasts ~10-140 cycles depending on the CPU.
    for (int i = 0; i < 8; ++i) {
      if (__atomic_load_n(bell, __ATOMIC_ACQUIRE) != seen) return true;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

void Lane::Wait(uint32_t seen, std::chrono::milliseconds timeout) {
  uint32_t* bell = Word(block(true), kBell);
  if (__atomic_load_n(bell, __ATOMIC_ACQUIRE) != seen) return;
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1000000)};
  syscall(SYS_futex, bell, FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void Lane::WakeWaiter() { Ring(Word(block(true), kBell)); }

void Lane::Nudge() {
  syscall(SYS_futex, Word(block(true), kBell), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

}  // namespace pybackend::ipc
