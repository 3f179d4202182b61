#include "cuda/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace pybackend::cuda::trace {
namespace {

const char* Path() {
  const char* p = std::getenv("PYBACKEND_GPU_TRACE");
  return p != nullptr && *p != '\0' ? p : nullptr;
}

// Opened on first use, never closed (the process's lifetime); -1 when it cannot be opened
// (then nothing is recorded: tracing must never fail a request).
int Fd() {
  static const int fd = ::open(Path(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  return fd;
}

}  // namespace

const bool kOn = Path() != nullptr;

void Record(const char* stage, int64_t ns) {
  int fd = Fd();
  if (fd < 0) return;
  char line[128];
  int n = std::snprintf(line, sizeof(line), "pbtrace backend %s %lld\n", stage,
                        static_cast<long long>(ns));  // NOLINT(runtime/int): printf's type
  if (n > 0 && static_cast<size_t>(n) < sizeof(line)) {
    ssize_t written = ::write(fd, line, static_cast<size_t>(n));
    (void)written;
  }
}

}  // namespace pybackend::cuda::trace
