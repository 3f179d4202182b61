// Like pingpong.cc, with a Python process on the other end (pingpong_child.py): what one
// EXECUTE/RESULT-like round trip costs when the stub is Python, through the socket or
// through a shared page with a futex bell (the stub side through ctypes).
// Build and run from the repository root:
//   g++ -O2 benchmarks/pingpong/pingpong_python.cc -o /tmp/pingpong_python
//   /tmp/pingpong_python .venv/bin/python benchmarks/pingpong/pingpong_child.py
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
#include <string>

namespace {

constexpr int kRounds = 20000;

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value) {
  return syscall(SYS_futex, word, op, value, nullptr, nullptr, 0);
}

double Run(const char* python, const char* child, const std::string& mode) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return -1;
  int page_fd = memfd_create("pingpong", 0);
  if (page_fd < 0 || ftruncate(page_fd, 4096) != 0) return -1;
  char* page =
      static_cast<char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0));
  auto* down = reinterpret_cast<std::atomic<uint32_t>*>(page);
  auto* up = reinterpret_cast<std::atomic<uint32_t>*>(page + 64);
  pid_t pid = fork();
  if (pid == 0) {
    std::string s = std::to_string(sv[1]), p = std::to_string(page_fd);
    std::string n = std::to_string(kRounds);
    execl(python, python, child, s.c_str(), p.c_str(), mode.c_str(), n.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  char buf[256] = {0};
  usleep(500000);  // let the interpreter start: it is not part of a round trip
  auto start = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < kRounds; ++i) {
    if (mode == "socket") {
      send(sv[0], buf, 64, 0);
      while (recv(sv[0], buf, sizeof buf, MSG_DONTWAIT) < 0) {
        pollfd p{sv[0], POLLIN, 0};
        poll(&p, 1, -1);
      }
    } else {
      std::memcpy(page + 128, buf, 64);
      down->fetch_add(1);
      Futex(down, FUTEX_WAKE, 1);
      while (up->load() == i) Futex(up, FUTEX_WAIT, i);
      std::memcpy(buf, page + 2048, 64);
    }
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  waitpid(pid, nullptr, 0);
  close(sv[0]);
  close(sv[1]);
  close(page_fd);
  munmap(page, 4096);
  return std::chrono::duration<double, std::micro>(elapsed).count() / kRounds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PYTHON pingpong_child.py\n", argv[0]);
    return 2;
  }
  for (const char* mode : {"socket", "futex"}) {
    std::printf("%-7s %6.2f us per round trip (Python child)\n", mode, Run(argv[1], argv[2], mode));
  }
  return 0;
}
