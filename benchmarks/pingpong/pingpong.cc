// Cost of one cross-process round trip on this machine, by wake-up mechanism: what the
// EXECUTE/RESULT hop costs before any Python runs. Two processes bounce a 64-byte message
// (or only a counter) N times:
//   socket  SOCK_SEQPACKET send/recv, blocking (the kernel wakes the reader)
//   poll    send, then poll + recv on the reply (what the backend does)
//   hybrid  data on the socket, wake-ups through a futex in shared memory
//   futex   a counter in shared memory and futex wait/wake only (no data syscalls)
// Build and run:  g++ -O2 benchmarks/pingpong/pingpong.cc -o /tmp/pingpong && /tmp/pingpong
// Pin both to one CPU (taskset -c 0 /tmp/pingpong) to see the cost without cross-CPU wake-ups.
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

namespace {

constexpr int kRounds = 20000;
enum class Mode { kSocket, kPoll, kHybrid, kFutex };

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value) {
  return syscall(SYS_futex, word, op, value, nullptr, nullptr, 0);
}

// Blocks until *word != seen.
void WaitChange(std::atomic<uint32_t>* word, uint32_t seen) {
  while (word->load() == seen) Futex(word, FUTEX_WAIT, seen);
}

void Bump(std::atomic<uint32_t>* word, uint32_t value) {
  word->store(value);
  Futex(word, FUTEX_WAKE, 1);
}

void RecvPolled(int fd, char* buf, size_t len) {
  while (recv(fd, buf, len, MSG_DONTWAIT) < 0) {
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, -1);
  }
}

double Run(Mode mode) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return -1;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* to_child = new (page) std::atomic<uint32_t>(0);
  auto* to_parent = new (static_cast<char*>(page) + 64) std::atomic<uint32_t>(0);
  char buf[256] = {0};
  pid_t pid = fork();
  if (pid == 0) {
    for (uint32_t i = 0; i < kRounds; ++i) {
      switch (mode) {
        case Mode::kSocket:
          recv(sv[1], buf, sizeof buf, 0);
          send(sv[1], buf, 64, 0);
          break;
        case Mode::kPoll:
          RecvPolled(sv[1], buf, sizeof buf);
          send(sv[1], buf, 64, 0);
          break;
        case Mode::kHybrid:
          WaitChange(to_child, i);
          recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);
          send(sv[1], buf, 64, 0);
          Bump(to_parent, i + 1);
          break;
        case Mode::kFutex:
          WaitChange(to_child, i);
          Bump(to_parent, i + 1);
          break;
      }
    }
    _exit(0);
  }
  auto start = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < kRounds; ++i) {
    switch (mode) {
      case Mode::kSocket:
        send(sv[0], buf, 64, 0);
        recv(sv[0], buf, sizeof buf, 0);
        break;
      case Mode::kPoll:
        send(sv[0], buf, 64, 0);
        RecvPolled(sv[0], buf, sizeof buf);
        break;
      case Mode::kHybrid:
        send(sv[0], buf, 64, 0);
        Bump(to_child, i + 1);
        WaitChange(to_parent, i);
        recv(sv[0], buf, sizeof buf, MSG_DONTWAIT);
        break;
      case Mode::kFutex:
        Bump(to_child, i + 1);
        WaitChange(to_parent, i);
        break;
    }
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  waitpid(pid, nullptr, 0);
  close(sv[0]);
  close(sv[1]);
  munmap(page, 4096);
  return std::chrono::duration<double, std::micro>(elapsed).count() / kRounds;
}

}  // namespace

int main() {
  const struct {
    Mode mode;
    const char* name;
  } modes[] = {{Mode::kSocket, "socket"},
               {Mode::kPoll, "poll"},
               {Mode::kHybrid, "hybrid"},
               {Mode::kFutex, "futex"}};
  for (const auto& m : modes) std::printf("%-7s %6.2f us per round trip\n", m.name, Run(m.mode));
  return 0;
}
